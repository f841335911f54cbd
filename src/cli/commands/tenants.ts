/**
 * `tickctl tenants …`: tenants own jobs and the secrets their webhooks are signed with; pause,
 * resume and cancel act on all of a tenant's jobs at once (AdminService Bulk*).
 */
import { Command } from 'commander';
import type { CliRun } from '../io.js';
import {
  EXIT_CODES_HELP,
  durationMs,
  iso,
  text,
  printJson,
  remote,
  table,
  UsageError,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

const HEADER = [
  'ID',
  'SECRETS',
  'INFLIGHT MAX',
  'WEIGHT',
  'HISTORY KEPT',
  'DLQ KEPT',
  'PREVIOUS SECRET UNTIL',
  'UPDATED',
];

/** `100 runs / 7d`: what a retention keeps per job. */
function kept(count: unknown, ageMs: unknown): string {
  if (typeof count !== 'number' || typeof ageMs !== 'number') return '-';
  const units: [number, string][] = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1000, 's'],
  ];
  const unit = units.find(([ms]) => ageMs % ms === 0) ?? [1, 'ms'];
  return `${count} / ${ageMs / unit[0]}${unit[1]}`;
}

function rows(tenants: Obj[]): string[][] {
  return tenants.map((t) => {
    const r = (t['retention'] as Obj | null | undefined) ?? {};
    return [
      text(t['id']),
      ((t['secretHints'] as string[] | undefined) ?? []).join(' '),
      text(t['inflightMax']),
      text(t['priorityWeight']),
      kept(r['historyPerJob'], r['historyMaxAgeMs']),
      kept(r['deadPerJob'], r['deadMaxAgeMs']),
      t['previousSecretUntilMs'] === undefined ? '-' : iso(t['previousSecretUntilMs']),
      iso(t['updatedAtMs']),
    ];
  });
}

interface TenantFlags {
  inflightMax?: string;
  priorityWeight?: string;
  historyPerJob?: string;
  historyMaxAge?: string;
  deadPerJob?: string;
  deadMaxAge?: string;
  maxJobs?: string;
  writeRate?: string;
  writeBurst?: string;
  fireRate?: string;
}

/** The run-retention and limit options, on `tenants create` and `tenants update`. */
function retentionOptions(cmd: Command): Command {
  return cmd
    .option('--max-jobs <n>', 'jobs the tenant may register, 1-100000000 (default 10000000)')
    .option(
      '--write-rate <n>',
      'API writes per second on each node taking its calls, 1-1000000 (default 1000)',
    )
    .option(
      '--write-burst <n>',
      'writes at once after a quiet spell, ≥ --write-rate (default 2000)',
    )
    .option(
      '--fire-rate <n>',
      'runs handed to delivery per second across the cluster, 1-10000000 (default 50000); ' +
        'beyond it runs wait their turn',
    )
    .option('--history-per-job <n>', 'finished runs (DEAD aside) kept per job, 1-100 (default 100)')
    .option('--history-max-age <duration>', 'and for how long, 1m-7d (default 7d)')
    .option('--dead-per-job <n>', 'DEAD runs (the DLQ) kept per job, 1-1000 (default 100)')
    .option('--dead-max-age <duration>', 'and for how long, 1m-90d (default 14d)');
}

const WEIGHT_HELP =
  'share of delivery starts against other tenants with queued work, 1-100 (default 1)';

/** The optional tenant fields given on the command line, checked. */
function changes(o: TenantFlags): Obj {
  const out: Obj = {};
  if (o.inflightMax !== undefined)
    out['inflightMax'] = wholeNumber('--inflight-max', o.inflightMax, 1);
  if (o.priorityWeight !== undefined)
    out['priorityWeight'] = wholeNumber('--priority-weight', o.priorityWeight, 1);
  const retention: Obj = {};
  if (o.historyPerJob !== undefined)
    retention['historyPerJob'] = wholeNumber('--history-per-job', o.historyPerJob, 1);
  if (o.historyMaxAge !== undefined)
    retention['historyMaxAgeMs'] = durationMs('--history-max-age', o.historyMaxAge);
  if (o.deadPerJob !== undefined)
    retention['deadPerJob'] = wholeNumber('--dead-per-job', o.deadPerJob, 1);
  if (o.deadMaxAge !== undefined)
    retention['deadMaxAgeMs'] = durationMs('--dead-max-age', o.deadMaxAge);
  if (Object.keys(retention).length > 0) out['retention'] = retention;
  const limits: Obj = {};
  if (o.maxJobs !== undefined) limits['maxJobs'] = wholeNumber('--max-jobs', o.maxJobs, 1);
  if (o.writeRate !== undefined)
    limits['writesPerSecond'] = wholeNumber('--write-rate', o.writeRate, 1);
  if (o.writeBurst !== undefined)
    limits['writeBurst'] = wholeNumber('--write-burst', o.writeBurst, 1);
  if (o.fireRate !== undefined)
    limits['firesPerSecond'] = wholeNumber('--fire-rate', o.fireRate, 1);
  if (Object.keys(limits).length > 0) out['limits'] = limits;
  return out;
}

function show(run: CliRun, o: RemoteOptions, t: Obj): void {
  if (o.json === true) printJson(run, t);
  else table(run, HEADER, rows([t]));
}

/**
 * The tenant's limits, one per line; with `usage` (GetTenant), what it uses against each. Shown
 * after the tenant's row by `get`, `create` and `update`, so a changed limit is seen at once.
 */
function showLimits(run: CliRun, t: Obj): void {
  const u = t['usage'] as Obj | null | undefined;
  const l = (t['limits'] as Obj | null | undefined) ?? {};
  const used = (s: string): string[] => (u ? [s] : []);
  const v = u ?? {};
  run.io.writeOut('\n');
  table(
    run,
    ['LIMIT', ...used('USED'), 'ALLOWED'],
    [
      [
        'jobs',
        ...used(
          `${text(v['jobs'])}${v['groupsCounted'] === v['groupsTotal'] ? '' : ` (${text(v['groupsCounted'])} of ${text(v['groupsTotal'])} groups counted)`}`,
        ),
        text(l['maxJobs']),
      ],
      [
        'deliveries in flight',
        ...used(`${text(v['deliveriesInflight'])} (+${text(v['deliveriesQueued'])} queued)`),
        text(t['inflightMax']),
      ],
      [
        'fires per second',
        ...used(
          `${text(v['firesLastSecond'])} (${text(v['firesThrottledLastSecond'])} waited for the rate)`,
        ),
        text(l['firesPerSecond']),
      ],
      [
        'API writes per second',
        ...used(`${text(v['writesLastSecond'])} (${text(v['writesRefusedLastSecond'])} refused)`),
        `${text(l['writesPerSecond'])} per node, burst ${text(l['writeBurst'])}`,
      ],
    ],
  );
  if (u && u['nodesAnswered'] !== u['nodesTotal'])
    run.io.writeErr(
      `usage from ${text(u['nodesAnswered'])} of ${text(u['nodesTotal'])} nodes (the others did not answer)\n`,
    );
}

/** `tenants get|update`: the tenant's row, then its limits (and usage, when given). */
function showWithLimits(run: CliRun, o: RemoteOptions, t: Obj): void {
  show(run, o, t);
  if (o.json !== true) showLimits(run, t);
}

export function registerTenantsCommand(program: Command, run: CliRun): void {
  const tenants = new Command('tenants').description('create and manage tenants');
  tenants.addHelpText('after', EXIT_CODES_HELP);

  retentionOptions(
    remote(tenants.command('create'))
      .description('create a tenant; prints its signing secret (generated unless --secret)')
      .argument('<tenant-id>', '1-63 of a-z 0-9 _ -')
      .option('--secret <whsec>', 'signing secret: whsec_ + base64 of 24-64 bytes')
      .option(
        '--inflight-max <n>',
        'deliveries of this tenant in flight across the cluster (default 10000)',
      )
      .option('--priority-weight <n>', WEIGHT_HELP),
  ).action(async (tenantId: string, o: RemoteOptions & TenantFlags & { secret?: string }) =>
    withClient(run, o, async (c) => {
      const req: Obj = { tenantId, signingSecret: o.secret ?? '', ...changes(o) };
      const res = await c.call<Obj>('TenantService', 'CreateTenant', req);
      if (o.json === true) return printJson(run, res);
      table(run, HEADER, rows([res['tenant'] as Obj]));
      showLimits(run, res['tenant'] as Obj);
      run.io.writeOut(`\nsigning secret (shown once): ${text(res['signingSecret'])}\n`);
    }),
  );

  remote(tenants.command('get'))
    .description('show a tenant and what it uses against each of its limits')
    .argument('<tenant-id>')
    .action(async (tenantId: string, o: RemoteOptions) =>
      withClient(run, o, async (c) =>
        showWithLimits(run, o, await c.call<Obj>('TenantService', 'GetTenant', { tenantId })),
      ),
    );

  retentionOptions(
    remote(tenants.command('update'))
      .description(
        "change a tenant's cap, priority weight, run retention or limits (at least one option)",
      )
      .argument('<tenant-id>')
      .option('--inflight-max <n>', 'deliveries of this tenant in flight across the cluster')
      .option('--priority-weight <n>', WEIGHT_HELP),
  ).action(async (tenantId: string, o: RemoteOptions & TenantFlags) =>
    withClient(run, o, async (c) => {
      const change = changes(o);
      if (Object.keys(change).length === 0)
        throw new UsageError(
          'give at least one of --inflight-max, --priority-weight, --history-per-job, --history-max-age, --dead-per-job, --dead-max-age, --max-jobs, --write-rate, --write-burst, --fire-rate',
        );
      showWithLimits(
        run,
        o,
        await c.call<Obj>('TenantService', 'UpdateTenant', { tenantId, ...change }),
      );
    }),
  );

  remote(tenants.command('rotate-secret'))
    .description('make a new signing secret current; the old one also signs during the grace')
    .argument('<tenant-id>')
    .option('--secret <whsec>', 'the new secret (generated when absent)')
    .option(
      '--grace-ms <ms>',
      'how long the old secret keeps signing (default 86400000; 0: stop now)',
    )
    .action(async (tenantId: string, o: RemoteOptions & { secret?: string; graceMs?: string }) =>
      withClient(run, o, async (c) => {
        const req: Obj = { tenantId, newSecret: o.secret ?? '' };
        if (o.graceMs !== undefined) req['gracePeriodMs'] = wholeNumber('--grace-ms', o.graceMs);
        const res = await c.call<Obj>('TenantService', 'RotateSecret', req);
        if (o.json === true) return printJson(run, res);
        table(run, HEADER, rows([res['tenant'] as Obj]));
        run.io.writeOut(`new signing secret (shown once): ${text(res['newSecret'])}\n`);
      }),
    );

  registerBulkCommands(tenants, run);

  remote(tenants.command('list'))
    .description('every tenant, by id')
    .option('--page-size <n>', 'tenants per page (1-1000)', '100')
    .option('--page-token <token>', 'continue after a previous page')
    .action(async (o: RemoteOptions & { pageSize: string; pageToken?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('TenantService', 'ListTenants', {
          pageSize: wholeNumber('--page-size', o.pageSize, 1),
          pageToken: o.pageToken ?? '',
        });
        if (o.json === true) return printJson(run, res);
        table(run, HEADER, rows(res['tenants'] as Obj[]));
        const token = text(res['nextPageToken'] ?? '');
        if (token !== '') run.io.writeErr(`more: --page-token ${token}\n`);
      }),
    );
  program.addCommand(tenants);
}

function bulkCommand(
  tenants: Command,
  run: CliRun,
  name: 'pause' | 'resume' | 'cancel',
  method: 'BulkPause' | 'BulkResume' | 'BulkCancel',
  description: string,
  done: string,
): Command {
  return remote(tenants.command(name))
    .description(description)
    .argument('<tenant-id>')
    .action(async (tenantId: string, o: RemoteOptions & { yes?: boolean }) =>
      withClient(run, o, async (c) => {
        if (name === 'cancel' && o.yes !== true)
          throw new UsageError(
            `cancel deletes every job of tenant ${tenantId}; add --yes to confirm`,
          );
        const res = await c.call<Obj>('AdminService', method, { tenant: tenantId });
        if (o.json === true) return printJson(run, res);
        const groups = (res['groups'] as Obj[] | undefined) ?? [];
        table(
          run,
          ['GROUP', 'JOBS', 'CHANGED', 'COMMITTED AFTER'],
          groups.map((g) => [
            text(g['groupId']),
            text(g['jobs']),
            text(g['changed']),
            `${text(g['committedAfterMs'])} ms`,
          ]),
        );
        run.io.writeOut(
          `${done} ${text(res['changedTotal'])} of ${text(res['jobsTotal'])} jobs of tenant ` +
            `${tenantId} in ${groups.length} groups; every group committed within ` +
            `${text(res['elapsedMs'])} ms\n`,
        );
      }),
    );
}

/** `tenants pause|resume|cancel`: every job of a tenant at once (AdminService Bulk*). */
function registerBulkCommands(tenants: Command, run: CliRun): void {
  bulkCommand(
    tenants,
    run,
    'pause',
    'BulkPause',
    'pause every job of a tenant, in every group (no delivery starts after it answers)',
    'paused',
  );
  bulkCommand(
    tenants,
    run,
    'resume',
    'BulkResume',
    'resume every paused job of a tenant, from now on',
    'resumed',
  );
  bulkCommand(
    tenants,
    run,
    'cancel',
    'BulkCancel',
    'delete every job of a tenant (runs not yet attempted are cancelled); needs --yes',
    'deleted',
  ).option('--yes', 'confirm: the jobs are deleted, not paused');
}
