/**
 * `tickctl runs logs FIRE_ID [--attempt N] [--follow]`: an attempt's output
 * (RunService.GetRunOutput): a webhook's response body, a worker's stdout and stderr as it
 * streamed them, a CompleteRun's output. The output itself goes to stdout, unchanged, so it can be
 * piped or saved; where it came from (the memory of the node that received it, or only the
 * replicated excerpt when that node lost it) goes to stderr. `--follow` reads on from where the
 * last read ended every half second while the attempt runs, as `tail -f` does, and exits 0 once
 * it ended.
 */
import type { Command } from 'commander';
import { status as grpcStatus } from '@grpc/grpc-js';
import { ApiCallError, type ApiClient } from '../../api/client.js';
import { RUN_OUTPUT_READ_BYTES_MAX } from '../../delivery/run-output-store.js';
import type { CliRun } from '../io.js';
import {
  remote,
  tenantOf,
  tenantOption,
  text,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

/** How often --follow reads again. */
export const FOLLOW_POLL_MS = 500;
/** Reads in a row --follow lets fail (a leader changing, a node restarting) before it gives up. */
const FOLLOW_FAILURES_MAX = 20;

interface LogsFlags extends RemoteOptions {
  tenant?: string;
  attempt?: string;
  follow?: boolean;
}

export function registerRunLogsCommand(runs: Command, run: CliRun): void {
  remote(tenantOption(runs.command('logs'), "the run's tenant"))
    .description(
      "an attempt's output: a webhook's response body, a worker's stdout and stderr, a completion's output (--follow while it runs)",
    )
    .argument('<fire-id>', 'tenant/job-id:slot-ms, as runs list shows it')
    .option('--attempt <n>', 'the attempt (default: the latest, the one running if there is one)')
    .option(
      '--follow',
      'keep printing the output as it comes, every 0.5 s, until the attempt ends; then exit 0',
    )
    .action(async (fireId: string, o: LogsFlags) =>
      withClient(run, o, async (c) => {
        const req: Obj = { fireId, tenant: tenantOf(o), offset: 0 };
        if (o.attempt !== undefined) req['attempt'] = wholeNumber('--attempt', o.attempt, 1);
        await printLogs(run, c, req, o.json === true, o.follow === true);
      }),
    );
}

async function printLogs(
  run: CliRun,
  c: ApiClient,
  req: Obj,
  json: boolean,
  follow: boolean,
): Promise<void> {
  let lastChar = '\n';
  let source = '';
  const show = (res: Obj): void => {
    if (json) {
      // One object per read, one per line: a script reads them as they come.
      run.io.writeOut(`${JSON.stringify(res)}\n`);
      return;
    }
    const out = text(res['output'] ?? '');
    if (out !== '') {
      run.io.writeOut(out);
      lastChar = out[out.length - 1] ?? lastChar;
    }
    const from = text(res['source'] ?? '');
    if (source === 'node' && from === 'excerpt')
      run.io.writeErr(
        `tickctl: node ${text(res['nodeId'])} no longer answers for this output; only the attempt record's excerpt is left\n`,
      );
    source = from;
  };
  const read = async (): Promise<Obj> => {
    const res = await c.call<Obj>('RunService', 'GetRunOutput', req);
    // Every later read is of this attempt (the latest may change while it is followed), from
    // where this one ended; never back (a read of the excerpt ends before the node's did).
    req['attempt'] = res['attempt'];
    req['offset'] = Math.max(Number(req['offset'] ?? 0), Number(res['nextOffset'] ?? 0));
    show(res);
    return res;
  };
  let res = await read();
  // A read answers at most 1 MiB: one that came that close may have more behind it.
  while (Buffer.byteLength(text(res['output'] ?? '')) > RUN_OUTPUT_READ_BYTES_MAX - 4)
    res = await read();
  let failures = 0;
  while (follow && res['complete'] !== true) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
    try {
      res = await read();
      failures = 0;
    } catch (err) {
      // The run's leader changing, or a node restarting: read again, within a bound.
      const transient =
        err instanceof ApiCallError &&
        (err.status === grpcStatus.UNAVAILABLE || err.status === grpcStatus.DEADLINE_EXCEEDED);
      if (!transient || ++failures > FOLLOW_FAILURES_MAX) throw err;
      if (failures === 1) run.io.writeErr(`tickctl: logs: ${err.message}; reading again\n`);
    }
  }
  if (json) return;
  if (lastChar !== '\n') run.io.writeOut('\n');
  run.io.writeErr(`${summary(res)}\n`);
}

/** Where the output came from, and whether it is all of it: for stderr. */
function summary(res: Obj): string {
  const head = `tickctl: ${text(res['fireId'])} attempt ${text(res['attempt'])}`;
  const node = text(res['nodeId'] ?? '');
  const state = res['complete'] === true ? 'ended' : 'still running';
  if (res['source'] === 'node')
    return `${head} (${state}): output kept by node ${node}${res['truncated'] === true ? ", cut at that node's --run-output-max-bytes" : ''}`;
  const why =
    node === ''
      ? 'no node keeps a full output for it'
      : `node ${node} does not have the full output (restarted, unreachable, evicted it, or keeps none)`;
  return `${head} (${state}): the attempt record's excerpt only: ${why}`;
}
