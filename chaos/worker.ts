/**
 * The chaos run's pull-based worker, a process of its own like the sink (chaos/sink.ts): it
 * serves the `chaos` worker pool on every node (src/api/worker-client.ts, nodes found from
 * ClusterStatus), records every lease as a DeliveryRecord in its own history file, fences like
 * the sink, and misbehaves on purpose for a seeded fraction of leases, so that the checker holds
 * jobs leased to workers to the same rules as webhook jobs.
 *
 *   tsx chaos/worker.ts --history FILE --started-at EPOCH_MS --endpoints HOST:PORT,… [--seed N]
 *     [--slow-fraction F] [--error-fraction F] [--slow-ms N]
 *
 * Prints `worker ready` once its first lookup of the nodes is done; SIGTERM closes it (exit 0).
 *
 * Fencing rule `term`, per job, as the sink's: a lease whose token is of an older leader term
 * than the newest accepted, or a token already accepted, is recorded `stale` and failed for good
 * (the sink's 409). Answers, drawn per lease from the seed: `5xx` (a retryable failure at once),
 * `slow` (held `--slow-ms` ± 50 %, renewed meanwhile, then success), otherwise `2xx` (success).
 */
import { Command } from 'commander';
import { performance } from 'node:perf_hooks';
import { PermanentRunError, Worker } from '../src/api/worker-client.js';
import { SeededRand } from '../src/base/rand.js';
import type { DeliveryRecord, SinkAnswer } from './history/format.js';
import { HistoryWriter } from './history/jsonl.js';
import { TermFence } from './term-fence.js';
import { CHAOS_POOL } from './workload.js';

interface Flags {
  readonly history: string;
  readonly startedAt: string;
  readonly endpoints: string;
  readonly seed: string;
  readonly slowFraction: string;
  readonly errorFraction: string;
  readonly slowMs: string;
}

function fail(message: string): never {
  process.stderr.write(`chaos worker: ${message}\n`);
  process.exit(2);
}

function fraction(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0 || n > 1) fail(`${flag} must be in [0, 1], got '${text}'`);
  return n;
}

async function run(flags: Flags): Promise<void> {
  const startedAt = Number(flags.startedAt);
  if (!Number.isFinite(startedAt) || startedAt <= 0) fail('--started-at must be epoch ms');
  const slowFraction = fraction(flags.slowFraction, '--slow-fraction');
  const errorFraction = fraction(flags.errorFraction, '--error-fraction');
  const slowMs = Number(flags.slowMs);
  if (!Number.isSafeInteger(slowMs) || slowMs < 0) fail('--slow-ms must be a whole number ≥ 0');
  const endpoints = flags.endpoints.split(',').filter((e) => e !== '');
  if (endpoints.length === 0) fail('--endpoints must name at least one node');
  const rand = new SeededRand(Number(flags.seed) >>> 0);
  const history = new HistoryWriter(flags.history);
  const fence = new TermFence();
  const now = (): number => performance.timeOrigin + performance.now() - startedAt;
  const worker = new Worker({
    endpoints,
    workerId: `chaos-worker-${process.pid}`,
    pool: CHAOS_POOL,
    capacity: 64,
    discoverEveryMs: 2000,
    handle: async (lease) => {
      const base = {
        type: 'delivery' as const,
        t: now(),
        fireId: lease.fireId,
        jobId: lease.jobId,
        slotMs: lease.slotMs,
        attempt: lease.attempt,
        token: lease.fencingToken,
        node: lease.nodeId,
      };
      // Recorded before the answer, as the sink does: a worker killed after it keeps the receipt.
      const record = (answer: SinkAnswer, status: number, heldMs?: number): void => {
        const r: DeliveryRecord =
          heldMs === undefined ? { ...base, answer, status } : { ...base, answer, status, heldMs };
        history.append(r);
      };
      if (!fence.admit(lease.jobId, lease.fencingToken)) {
        record('stale', 409);
        throw new PermanentRunError('stale fencing token');
      }
      const draw = rand.float();
      if (draw < errorFraction) {
        record('5xx', 503);
        throw new Error('chaos: seeded error');
      }
      if (draw < errorFraction + slowFraction) {
        const heldMs = Math.round(slowMs * (0.5 + rand.float()));
        record('slow', 200, heldMs);
        await new Promise((resolve) => setTimeout(resolve, heldMs));
        return { output: 'ok (slow)' };
      }
      record('2xx', 200);
      return { output: 'ok' };
    },
  });
  await worker.start();
  process.stdout.write(`worker ready on ${worker.nodes.join(',')}\n`);
  const stop = (): void => {
    void worker.stop(1000).then(() => {
      history.close();
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

new Command()
  .name('chaos-worker')
  .description(
    'Pull-based worker of a chaos run: records every lease, fences by term, misbehaves on purpose.',
  )
  .requiredOption('--history <file>', 'history file (JSON lines) to append delivery records to')
  .requiredOption('--started-at <epochMs>', "the run's meta.startedAtEpochMs (time base of `t`)")
  .requiredOption('--endpoints <list>', 'client API addresses of nodes, comma-separated')
  .option('--seed <n>', 'seed of the answer draws', '1')
  .option('--slow-fraction <f>', 'fraction of leases held before a success', '0.02')
  .option('--error-fraction <f>', 'fraction of leases failed (retryable)', '0.03')
  .option('--slow-ms <n>', 'mean hold of a slow lease, ms', '1500')
  .action(run)
  .parseAsync()
  .catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
