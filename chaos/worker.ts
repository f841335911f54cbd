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
import { PermanentRunError, Worker } from '../src/api/worker-client.js';
import { addReceiverOptions, Receiver, type ReceiverFlags } from './receiver.js';
import { CHAOS_POOL } from './workload.js';

interface Flags extends ReceiverFlags {
  readonly endpoints: string;
}

function fail(message: string): never {
  process.stderr.write(`chaos worker: ${message}\n`);
  process.exit(2);
}

async function run(flags: Flags): Promise<void> {
  const receiver = new Receiver(flags, fail);
  const endpoints = flags.endpoints.split(',').filter((e) => e !== '');
  if (endpoints.length === 0) fail('--endpoints must name at least one node');
  const worker = new Worker({
    endpoints,
    token: process.env['TICKRAFT_TOKEN'] || undefined,
    workerId: `chaos-worker-${process.pid}`,
    pool: CHAOS_POOL,
    capacity: 64,
    discoverEveryMs: 2000,
    handle: async (lease) => {
      const verdict = receiver.receive({
        fireId: lease.fireId,
        jobId: lease.jobId,
        slotMs: lease.slotMs,
        attempt: lease.attempt,
        token: lease.fencingToken,
        node: lease.nodeId,
      });
      switch (verdict.answer) {
        case 'stale':
          throw new PermanentRunError('stale fencing token');
        case '5xx':
          throw new Error('chaos: seeded error');
        case 'slow':
          await new Promise((resolve) => setTimeout(resolve, verdict.heldMs));
          return { output: 'ok (slow)' };
        case '2xx':
          return { output: 'ok' };
      }
    },
  });
  await worker.start();
  process.stdout.write(`worker ready on ${worker.nodes.join(',')}\n`);
  const stop = (): void => {
    void worker.stop(1000).then(() => {
      receiver.close();
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

addReceiverOptions(
  new Command()
    .name('chaos-worker')
    .description(
      'Pull-based worker of a chaos run: records every lease, fences by term, misbehaves on purpose.',
    ),
  'leases held before a success',
  'leases failed (retryable)',
)
  .requiredOption('--endpoints <list>', 'client API addresses of nodes, comma-separated')
  .action(run)
  .parseAsync()
  .catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
