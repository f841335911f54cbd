/**
 * `tickctl runs complete | heartbeat | watch`: finishing a run its webhook accepted (202) and
 * keeping it alive, as an operator or a script acting for the receiver does, and following a
 * job's runs live (RunService.WatchRuns), as `kubectl get -w` follows pods.
 */
import type { Command } from 'commander';
import { ApiCallError, type ApiClient } from '../../api/client.js';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { CliRun } from '../io.js';
import {
  choiceOption,
  durationMs,
  enumText,
  iso,
  printJson,
  remote,
  table,
  tenantOf,
  tenantOption,
  text,
  UsageError,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

const OUTCOMES = ['success', 'retry', 'fail'] as const;

/** Pause before watching again after the group's leader changed. */
const REWATCH_PAUSE_MS = 300;

export function registerRunWorkflowCommands(runs: Command, run: CliRun): void {
  remote(tenantOption(runs.command('complete'), "the run's tenant"))
    .description(
      'finish a RUNNING run whose webhook answered 202 (asynchronous completion), as its receiver would',
    )
    .argument('<fire-id>', 'tenant/job-id:slot-ms (the Idempotency-Key header of the request)')
    .requiredOption('--token <n>', "the accepted request's Tickraft-Fencing-Token")
    .addOption(
      choiceOption(
        '--outcome <outcome>',
        "success; retry (retried by the job's policy); fail (to the DLQ)",
        OUTCOMES,
      ).makeOptionMandatory(),
    )
    .option('--error <text>', 'why it failed (retry, fail)')
    .option('--output <text>', "a result kept as the attempt's output")
    .option('--retry-after <duration>', 'retry: the wait wished before the next attempt (e.g. 30s)')
    .action(
      async (
        fireId: string,
        o: RemoteOptions & {
          tenant?: string;
          token: string;
          outcome: (typeof OUTCOMES)[number];
          error?: string;
          output?: string;
          retryAfter?: string;
        },
      ) =>
        withClient(run, o, async (c) => {
          const req: Obj = {
            fireId,
            tenant: tenantOf(o),
            fencingToken: wholeNumber('--token', o.token, 1),
            outcome: `ATTEMPT_OUTCOME_${o.outcome.toUpperCase()}`,
            error: o.error ?? '',
            output: o.output ?? '',
          };
          if (o.retryAfter !== undefined) {
            if (o.outcome !== 'retry')
              throw new UsageError('--retry-after goes with --outcome retry');
            req['retryAfterMs'] = durationMs('--retry-after', o.retryAfter);
          }
          const r = await c.call<Obj>('RunService', 'CompleteRun', req);
          if (o.json === true) return printJson(run, r);
          run.io.writeOut(`${text(r['fireId'])}: ${enumText(r['status'], 'RUN_STATUS_')}\n`);
        }),
    );

  remote(tenantOption(runs.command('heartbeat'), "the run's tenant"))
    .description('keep a RUNNING run alive: its completion deadline restarts from now')
    .argument('<fire-id>', 'tenant/job-id:slot-ms')
    .requiredOption('--token <n>', "the accepted request's Tickraft-Fencing-Token")
    .option(
      '--extend <duration>',
      "the new deadline from now (default: the job's completion timeout)",
    )
    .action(
      async (
        fireId: string,
        o: RemoteOptions & { tenant?: string; token: string; extend?: string },
      ) =>
        withClient(run, o, async (c) => {
          const req: Obj = {
            fireId,
            tenant: tenantOf(o),
            fencingToken: wholeNumber('--token', o.token, 1),
          };
          if (o.extend !== undefined) req['extendMs'] = durationMs('--extend', o.extend);
          const r = await c.call<Obj>('RunService', 'Heartbeat', req);
          if (o.json === true) return printJson(run, r);
          run.io.writeOut(`${text(r['fireId'])}: complete by ${iso(r['completeByMs'])}\n`);
        }),
    );

  remote(tenantOption(runs.command('watch'), "the job's tenant"))
    .description(
      "follow a job's runs live: every run first, then a line each time one changes (until Ctrl-C or --for)",
    )
    .argument('<job-id>')
    .option('--for <duration>', 'stop after this long (e.g. 30s, 10m) and exit 0')
    .action(async (jobId: string, o: RemoteOptions & { tenant?: string; for?: string }) =>
      withClient(run, o, async (c) => {
        const forMs = o.for === undefined ? undefined : durationMs('--for', o.for);
        await watch(run, c, { jobId, tenant: tenantOf(o) }, o.json === true, forMs);
      }),
    );
}

/** What a line shows of a run: printing it again only when this changes. */
function shownOf(r: Obj): string {
  const attempts = (r['attempts'] as Obj[] | undefined) ?? [];
  const last = attempts[attempts.length - 1];
  return `${text(r['status'])}|${attempts.length}|${text(last?.['outcome'] ?? '')}|${text(r['completeByMs'] ?? '')}`;
}

function lineOf(kind: string, r: Obj): string[] {
  const attempts = (r['attempts'] as Obj[] | undefined) ?? [];
  const last = attempts[attempts.length - 1];
  const detail =
    kind === 'REMOVED'
      ? 'removed'
      : [
          last === undefined ? '' : `attempt ${text(last['attempt'])}`,
          last?.['statusCode'] ? `HTTP ${text(last['statusCode'])}` : '',
          last?.['workerId'] ? `worker ${text(last['workerId'])}` : '',
          r['completeByMs'] === undefined ? '' : `complete by ${iso(r['completeByMs'])}`,
          text(r['reason'] ?? ''),
        ]
          .filter((s) => s !== '')
          .join(', ');
  return [
    new Date().toISOString(),
    text(r['fireId']),
    kind === 'REMOVED' ? '-' : enumText(r['status'], 'RUN_STATUS_'),
    detail,
  ];
}

async function watch(
  run: CliRun,
  c: ApiClient,
  req: Obj,
  json: boolean,
  forMs: number | undefined,
): Promise<void> {
  const stop = new AbortController();
  const timer = forMs === undefined ? undefined : setTimeout(() => stop.abort(), forMs);
  const printed = new Map<string, string>();
  if (!json) table(run, ['TIME', 'FIRE ID', 'STATUS', 'DETAIL'], []);
  try {
    while (!stop.signal.aborted) {
      try {
        await c.stream<Obj>(
          'RunService',
          'WatchRuns',
          req,
          (ev) => {
            const r = (ev['run'] as Obj | undefined) ?? {};
            const kind = text(ev['kind']);
            const id = text(r['fireId']);
            const shown = kind === 'REMOVED' ? 'removed' : shownOf(r);
            // After watching again, the new leader's INITIAL messages repeat what was printed.
            if (printed.get(id) === shown) return;
            printed.set(id, shown);
            // One JSON object per line (a stream a script reads line by line).
            if (json) run.io.writeOut(`${JSON.stringify({ kind, run: r, atMs: ev['atMs'] })}\n`);
            else run.io.writeOut(`${lineOf(kind, r).join('  ')}\n`);
          },
          stop.signal,
        );
        return;
      } catch (err) {
        // Watched again: the group's leader changed (its code says so), or a stream that was
        // up broke. A node that never answered is an error like any call's.
        const leaderMoved =
          err instanceof ApiCallError &&
          err.status === grpcStatus.UNAVAILABLE &&
          (err.code !== 'UNAVAILABLE' || printed.size > 0);
        if (!leaderMoved) throw err;
        run.io.writeErr(`tickctl: watch: ${err.message}; watching again\n`);
        await new Promise((resolve) => setTimeout(resolve, REWATCH_PAUSE_MS));
      }
    }
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}
