/**
 * `tickctl worker`: a pull-based worker from the command line (src/api/worker-client.ts). It
 * connects to every node, takes leases of runs whose job targets `worker:<pool>`, and either
 * runs `--exec` for each (the payload on stdin, the run's identity in TICKRAFT_* variables; exit
 * 0 succeeds, an exit code listed in --fail-exit fails the run for good, any other is retried by
 * the job's retry policy) or, without --exec, prints each lease and completes it as done. The
 * command's stdout and stderr stream to the node holding the lease as they come (`tickctl runs
 * logs --follow` shows them), besides being printed here line by line.
 * SIGINT or SIGTERM: no more leases, the runs in hand get --drain-ms to finish, exit 0.
 */
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { Option, type Command } from 'commander';
import {
  PermanentRunError,
  Worker,
  type LeasedRun,
  type RunOutputWriter,
  type WorkerResult,
} from '../../api/worker-client.js';
import { WORKER_CAPACITY_MAX, WORKER_ID_CHARS_MAX } from '../../delivery/worker-hub.js';
import { WORKER_NAME, WORKER_NAME_RULE, WORKER_TAGS_MAX } from '../../delivery/worker-target.js';
import { EXIT_OK, EXIT_USAGE, type CliRun } from '../io.js';
import {
  DEFAULT_ENDPOINT,
  readTlsFlags,
  tlsOptions,
  tokenFor,
  UsageError,
  type TlsFlags,
} from '../remote.js';

/** Most output of a command kept as the attempt's excerpt (the node keeps 1024 characters). */
const OUTPUT_MAX = 1024;
/** A command told to stop (its lease was revoked) that still runs after this is killed. */
const KILL_AFTER_MS = 5000;

interface WorkerFlags extends TlsFlags {
  endpoint: string;
  pool: string;
  tags?: string;
  capacity: string;
  id?: string;
  exec?: string;
  failExit?: string;
  drainMs: string;
  tokenFile?: string;
}

export function registerWorkerCommand(program: Command, run: CliRun): void {
  const worker = program
    .command('worker')
    .description(
      'run a pull-based worker: lease the runs of jobs whose target is worker:<pool> and run --exec for each (Ctrl-C drains and stops)',
    )
    .addOption(
      new Option('--endpoint <host:port,...>', 'nodes to find the cluster from (any one will do)')
        .env('TICKCTL_ENDPOINT')
        .default(DEFAULT_ENDPOINT),
    )
    .option(
      '--token-file <file>',
      'file holding a worker token of the tenant whose runs to take (else TICKRAFT_TOKEN, else .tickraft/admin.token if it exists)',
    )
    .requiredOption('--pool <name>', 'the worker pool (a job targets it as worker:<name>)')
    .option(
      '--tags <a,b>',
      "tags this worker offers (a job's worker:<pool>?tags=... must all be offered)",
    )
    .option('--capacity <n>', 'runs at once per node connection', '1')
    .option('--id <worker-id>', 'names the worker in attempt records (default: hostname:pid)')
    .option(
      '--exec <command>',
      "shell command per run: payload JSON on stdin, TICKRAFT_JOB_ID, TICKRAFT_FIRE_ID, TICKRAFT_FENCING_TOKEN, TICKRAFT_ATTEMPT, TICKRAFT_SLOT, TICKRAFT_TENANT in its environment; stdout and stderr stream to the node as they come (tickctl runs logs), the first 1 KiB of stdout is the attempt record's excerpt",
    )
    .option(
      '--fail-exit <codes>',
      'exit codes of --exec that fail the run without retry (e.g. 2,64)',
    )
    .option('--drain-ms <ms>', 'on SIGINT/SIGTERM, how long runs in hand get to finish', '10000');
  tlsOptions(worker).action(async (o: WorkerFlags) => {
    run.exitCode = await runWorker(run, o);
  });
}

async function runWorker(run: CliRun, o: WorkerFlags): Promise<number> {
  const io = run.io;
  const usage = (msg: string): number => {
    io.writeErr(`tickctl worker: ${msg}\n`);
    return EXIT_USAGE;
  };
  if (!WORKER_NAME.test(o.pool)) return usage(`--pool: ${WORKER_NAME_RULE}`);
  const tags = o.tags === undefined || o.tags === '' ? [] : o.tags.split(',');
  if (tags.length > WORKER_TAGS_MAX) return usage(`--tags: at most ${WORKER_TAGS_MAX}`);
  const badTag = tags.find((t) => !WORKER_NAME.test(t));
  if (badTag !== undefined) return usage(`--tags: "${badTag}" ${WORKER_NAME_RULE}`);
  const capacity = Number(o.capacity);
  if (!Number.isInteger(capacity) || capacity < 1 || capacity > WORKER_CAPACITY_MAX) {
    return usage(`--capacity: must be a whole number in [1, ${WORKER_CAPACITY_MAX}]`);
  }
  const drainMs = Number(o.drainMs);
  if (!Number.isSafeInteger(drainMs) || drainMs < 0)
    return usage('--drain-ms: must be a whole number of ms');
  const failExit = new Set<number>();
  for (const c of (o.failExit ?? '').split(',').filter((x) => x !== '')) {
    const n = Number(c);
    if (!Number.isInteger(n) || n < 1 || n > 255)
      return usage(`--fail-exit: "${c}" is not an exit code in [1, 255]`);
    failExit.add(n);
  }
  const endpoints = o.endpoint.split(',').filter((e) => e !== '');
  if (endpoints.length === 0) return usage('--endpoint: name at least one node');
  let token: string | undefined;
  try {
    token = tokenFor(o);
  } catch (err) {
    return usage(err instanceof Error ? err.message : String(err));
  }
  const workerId = o.id ?? `${hostname()}:${process.pid}`;
  if (workerId === '' || workerId.length > WORKER_ID_CHARS_MAX) {
    return usage(`--id: must be 1-${WORKER_ID_CHARS_MAX} characters`);
  }
  let tls;
  try {
    tls = readTlsFlags(o);
  } catch (err) {
    if (err instanceof UsageError) return usage(err.message);
    throw err;
  }
  const line = (text: string): void =>
    io.writeOut(`${new Date(io.clock.nowMs()).toISOString()}  ${text}\n`);
  const exec = o.exec;
  const worker = new Worker({
    endpoints,
    token,
    workerId,
    pool: o.pool,
    tags,
    capacity,
    ...(tls !== undefined ? { tls } : {}),
    log: {
      info: () => {},
      warn: (fields, msg) => io.writeErr(`tickctl worker: ${msg} ${JSON.stringify(fields)}\n`),
    },
    onRefused: (fireId, kind, reason) => line(`fire ${fireId}  ${kind} refused: ${reason}`),
    handle: async (lease, signal, output) => {
      line(
        `lease  job ${lease.jobId}  fire ${lease.fireId}  slot ${lease.slot}  lag ${io.clock.nowMs() - lease.slotMs}ms` +
          `  attempt ${lease.attempt}  token ${lease.fencingToken}  from ${lease.nodeId}`,
      );
      if (exec === undefined) {
        line(`done   fire ${lease.fireId}`);
        return {};
      }
      try {
        // Runs in hand at once interleave their output: every line says whose it is.
        const show = (stream: 'stdout' | 'stderr', text: string): void =>
          line(`${stream} fire ${lease.fireId}  ${text}`);
        const result = await runCommand(exec, lease, signal, failExit, show, output);
        line(`done   fire ${lease.fireId}`);
        return result;
      } catch (err) {
        line(`failed fire ${lease.fireId}: ${err instanceof Error ? err.message : String(err)}`);
        throw err;
      }
    },
  });
  await worker.start();
  io.writeOut(
    `tickctl worker: ${workerId} serving pool ${o.pool}${tags.length ? ` (tags ${tags.join(',')})` : ''}` +
      ` with capacity ${capacity} per node on ${worker.nodes.join(', ')}; Ctrl-C stops\n`,
  );
  const signalName = await new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  const running = worker.runningCount;
  await worker.stop(drainMs);
  io.writeOut(`tickctl worker: stopped (${signalName}); ${running} run(s) were in hand\n`);
  return EXIT_OK;
}

/** Calls `emit` with each complete line of a stream, and the unfinished last one at its end. */
function eachLine(stream: NodeJS.ReadableStream, emit: (line: string) => void): void {
  let pending = '';
  stream.on('data', (chunk: string) => {
    pending += chunk;
    for (let at = pending.indexOf('\n'); at >= 0; at = pending.indexOf('\n')) {
      emit(pending.slice(0, at));
      pending = pending.slice(at + 1);
    }
  });
  stream.on('end', () => {
    if (pending !== '') emit(pending);
    pending = '';
  });
}

/**
 * Runs the command for one lease; resolves on exit 0, rejects otherwise. Its stdout (the first
 * 1 KiB is the attempt's excerpt) and stderr are shown line by line through `show`, and streamed
 * as they come, interleaved as they arrive, through `output` (the run's output on the node).
 */
function runCommand(
  command: string,
  lease: LeasedRun,
  signal: AbortSignal,
  failExit: ReadonlySet<number>,
  show: (stream: 'stdout' | 'stderr', line: string) => void,
  output: RunOutputWriter,
): Promise<WorkerResult> {
  return new Promise((resolve, reject) => {
    // Its own process group: a Ctrl-C at the terminal reaches tickctl (which drains) and not the
    // commands in hand, and a revoked lease stops the command with everything it started.
    const child = spawn('/bin/sh', ['-c', command], {
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        TICKRAFT_JOB_ID: lease.jobId,
        TICKRAFT_TENANT: lease.tenant,
        TICKRAFT_FIRE_ID: lease.fireId,
        TICKRAFT_FENCING_TOKEN: String(lease.fencingToken),
        TICKRAFT_ATTEMPT: String(lease.attempt),
        TICKRAFT_SLOT: lease.slot,
      },
    });
    let killTimer: NodeJS.Timeout | undefined;
    const killGroup = (signal: NodeJS.Signals): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // The group is gone already.
      }
    };
    const onAbort = (): void => {
      killGroup('SIGTERM');
      killTimer = setTimeout(() => killGroup('SIGKILL'), KILL_AFTER_MS);
      killTimer.unref();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    let out = '';
    // Decoded as UTF-8 by the streams, so a part never ends inside a character.
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      if (out.length < OUTPUT_MAX) out += chunk.slice(0, OUTPUT_MAX - out.length);
      output(chunk);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => output(chunk));
    eachLine(child.stdout, (text) => show('stdout', text));
    eachLine(child.stderr, (text) => show('stderr', text));
    // A command that does not read its stdin must not fail the run with EPIPE.
    child.stdin.on('error', () => {});
    child.stdin.end(lease.payloadJson);
    child.on('error', (err) => {
      signal.removeEventListener('abort', onAbort);
      reject(err);
    });
    child.on('close', (code, sig) => {
      signal.removeEventListener('abort', onAbort);
      if (killTimer) clearTimeout(killTimer);
      if (code === 0) resolve({ output: out });
      else if (code !== null && failExit.has(code)) reject(new PermanentRunError(`exit ${code}`));
      else reject(new Error(code !== null ? `exit ${code}` : `killed by ${sig ?? 'a signal'}`));
    });
  });
}
