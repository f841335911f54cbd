/**
 * `tickctl runs …` (a job's runs, one run with its attempts, an attempt's output: run-logs.ts) and `tickctl dlq …` (a tenant's
 * DEAD runs across the cluster, and replaying one). Each takes `--tenant`: job ids are unique
 * per tenant, and a fire id (`<tenant>/<job id>:<slot ms>`) of another tenant is not found.
 */
import { Command } from 'commander';
import type { CliRun } from '../io.js';
import { RUN_VIEW_STATUSES } from '../../scheduler/run-view.js';
import { registerRunLogsCommand } from './run-logs.js';
import { registerRunWorkflowCommands } from './run-workflow.js';
import {
  choiceOption,
  durationMs,
  enumText,
  enumValue,
  EXIT_CODES_HELP,
  instant,
  iso,
  text,
  printJson,
  remote,
  table,
  tenantOf,
  tenantOption,
  UsageError,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

const RUN_HEADER = ['FIRE ID', 'SLOT', 'STATUS', 'ATTEMPTS', 'LAST CODE', 'REASON'];

function runRows(runs: Obj[]): string[][] {
  return runs.map((r) => {
    const attempts = (r['attempts'] as Obj[] | undefined) ?? [];
    const last = attempts[attempts.length - 1];
    return [
      text(r['fireId']),
      iso(r['slotMs']),
      enumText(r['status'], 'RUN_STATUS_'),
      text(attempts.length),
      last && last['statusCode'] ? text(last['statusCode']) : '-',
      text(r['reason'] ?? ''),
    ];
  });
}

interface PageOpts extends RemoteOptions {
  readonly pageSize: string;
  readonly pageToken?: string;
}

function pageOptions(cmd: Command): Command {
  return cmd
    .option('--page-size <n>', 'runs per page (1-1000)', '100')
    .option('--page-token <token>', 'continue after a previous page');
}

function printRuns(run: CliRun, o: RemoteOptions, res: Obj): void {
  if (o.json === true) return printJson(run, res);
  table(run, RUN_HEADER, runRows(res['runs'] as Obj[]));
  const token = text(res['nextPageToken'] ?? '');
  if (token !== '') run.io.writeErr(`more: --page-token ${token}\n`);
}

export function registerRunsCommands(program: Command, run: CliRun): void {
  const runs = new Command('runs').description("inspect a job's runs");
  runs.addHelpText('after', EXIT_CODES_HELP);

  remote(tenantOption(pageOptions(runs.command('list')), "the job's tenant"))
    .description("a job's runs, newest slot first")
    .argument('<job-id>')
    .addOption(choiceOption('--status <status>', 'only runs in this status', RUN_VIEW_STATUSES))
    .action(async (jobId: string, o: PageOpts & { tenant?: string; status?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('RunService', 'ListRuns', {
          jobId,
          tenant: tenantOf(o),
          status:
            o.status === undefined ? 'RUN_STATUS_UNSPECIFIED' : enumValue(o.status, 'RUN_STATUS_'),
          pageSize: wholeNumber('--page-size', o.pageSize, 1),
          pageToken: o.pageToken ?? '',
        });
        printRuns(run, o, res);
      }),
    );

  remote(tenantOption(runs.command('get'), "the run's tenant"))
    .description('one run with every attempt')
    .argument('<fire-id>', 'tenant/job-id:slot-ms, as runs list shows it')
    .action(async (fireId: string, o: RemoteOptions & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const r = await c.call<Obj>('RunService', 'GetRun', { fireId, tenant: tenantOf(o) });
        if (o.json === true) return printJson(run, r);
        table(run, RUN_HEADER, runRows([r]));
        if (typeof r['payloadJson'] === 'string')
          run.io.writeOut(`payload (this run's, not the job's): ${r['payloadJson']}\n`);
        const headerNames = (r['headerNames'] as string[] | undefined) ?? [];
        if (headerNames.length > 0)
          run.io.writeOut(`headers added for this run: ${headerNames.join(', ')}\n`);
        const attempts = (r['attempts'] as Obj[] | undefined) ?? [];
        if (attempts.length === 0) return;
        run.io.writeOut('\n');
        table(
          run,
          ['ATTEMPT', 'STARTED', 'OUTCOME', 'CODE', 'MS', 'TOKEN', 'ERROR OR RESPONSE'],
          attempts.map((a) => [
            text(a['attempt']),
            iso(a['startedAtMs']),
            enumText(a['outcome'], 'ATTEMPT_OUTCOME_', true),
            a['statusCode'] ? text(a['statusCode']) : '-',
            a['durationMs'] === undefined ? '-' : text(a['durationMs']),
            text(a['fencingToken']),
            // One line per attempt: a response or a worker's output may hold newlines.
            text(a['error'] || a['responseExcerpt'] || '')
              .replace(/\s+/g, ' ')
              .trim(),
          ]),
        );
      }),
    );
  registerRunWorkflowCommands(runs, run);
  registerRunLogsCommand(runs, run);
  program.addCommand(runs);

  const dlq = new Command('dlq').description('the dead-letter queue: runs that exhausted retries');
  dlq.addHelpText('after', EXIT_CODES_HELP);

  remote(tenantOption(pageOptions(dlq.command('list')), 'tenant whose dead runs to list'))
    .description("a tenant's DEAD runs across the cluster, most recently dead first")
    .action(async (o: PageOpts & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('RunService', 'ListDeadRuns', {
          tenant: tenantOf(o),
          pageSize: wholeNumber('--page-size', o.pageSize, 1),
          pageToken: o.pageToken ?? '',
        });
        printRuns(run, o, res);
      }),
    );

  remote(tenantOption(dlq.command('purge'), 'tenant whose dead runs to drop'))
    .description(
      "drop a tenant's DEAD runs from the DLQ in every group (all of them, one job's, or those that died before an instant or longer ago than a duration); needs --yes",
    )
    .option('--job <job-id>', "only this job's dead runs (also of a deleted job)")
    .option('--died-before <instant>', 'only runs that died before this ISO instant')
    .option('--older-than <duration>', 'only runs that died longer ago than this (e.g. 36h, 14d)')
    .option('--yes', 'confirm: the runs are dropped and cannot be replayed')
    .action(
      async (
        o: RemoteOptions & {
          tenant?: string;
          job?: string;
          diedBefore?: string;
          olderThan?: string;
          yes?: boolean;
        },
      ) =>
        withClient(run, o, async (c) => {
          if (o.diedBefore !== undefined && o.olderThan !== undefined)
            throw new UsageError('give --died-before or --older-than, not both');
          const req: Obj = { tenant: tenantOf(o), jobId: o.job ?? '' };
          if (o.diedBefore !== undefined)
            req['diedBeforeMs'] = instant('--died-before', o.diedBefore);
          if (o.olderThan !== undefined)
            req['diedBeforeMs'] = Date.now() - durationMs('--older-than', o.olderThan);
          if (o.yes !== true)
            throw new UsageError('purge drops dead runs for good; add --yes to confirm');
          const res = await c.call<Obj>('RunService', 'PurgeDeadRuns', req);
          if (o.json === true) return printJson(run, res);
          run.io.writeOut(
            `purged ${text(res['purged'])} dead runs of tenant ${text(req['tenant'])} in ` +
              `${text(res['groups'])} groups; every group committed within ` +
              `${text(res['elapsedMs'])} ms\n`,
          );
        }),
    );

  remote(tenantOption(dlq.command('replay'), "the run's tenant"))
    .description('schedule a DEAD run again, now')
    .argument('<fire-id>', 'tenant/job-id:slot-ms, as runs list shows it')
    .action(async (fireId: string, o: RemoteOptions & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const r = await c.call<Obj>('RunService', 'ReplayRun', { fireId, tenant: tenantOf(o) });
        if (o.json === true) return printJson(run, r);
        table(run, RUN_HEADER, runRows([r]));
      }),
    );
  program.addCommand(dlq);
}
