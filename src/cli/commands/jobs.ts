/**
 * `tickctl jobs …`: create, read, list, change and fire jobs through any node of a cluster.
 * `update` reads the job, applies the flags given and writes it back with the version it read,
 * so a concurrent change is reported (exit 4) instead of silently overwritten. Job ids are
 * unique per tenant: every command that names a job takes its `--tenant`.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { CliRun } from '../io.js';
import { registerJobGraphCommand } from './job-graph.js';
import {
  choiceOption,
  collect,
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

interface SpecFlags {
  readonly tenant?: string;
  readonly name?: string;
  readonly schedule?: string;
  readonly tz?: string;
  readonly anchor?: string;
  readonly url?: string;
  readonly header?: string[];
  readonly payload?: string;
  readonly delivery?: string;
  readonly maxAttempts?: string;
  readonly deadlineMs?: string;
  readonly misfire?: string;
  readonly overlap?: string;
  /** Parsed and range-checked by its option (maxConcurrencyOption). */
  readonly maxConcurrency?: number;
  readonly priority?: string;
  readonly start?: string;
  readonly end?: string;
  readonly fires?: string;
  readonly completionTimeout?: string;
  readonly dependsOn?: string;
  readonly onUpstreamFailure?: string;
}

export const UPSTREAM_FAILURE_CHOICES = ['skip', 'run'] as const;

export const DELIVERY_CHOICES = ['at_least_once', 'at_most_once'] as const;
export const MISFIRE_CHOICES = ['fire_once', 'fire_all', 'skip'] as const;
export const OVERLAP_CHOICES = ['allow', 'skip', 'buffer_one', 'buffer_all'] as const;
/** The API's bound on `overlap.max_concurrency` (src/api/job-spec.ts MAX_CONCURRENCY_MAX). */
export const MAX_CONCURRENCY_MAX = 1000;

/**
 * `--max-concurrency <n>`: a whole number in [1, MAX_CONCURRENCY_MAX], checked as the flags are
 * read, so a bad value is a usage error naming the flag before anything is sent (also on update,
 * which reads the job first).
 */
function maxConcurrencyOption(description: string): Option {
  return new Option('--max-concurrency <n>', description).argParser((value: string) => {
    const n = /^\d+$/.test(value.trim()) ? Number(value.trim()) : NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_CONCURRENCY_MAX)
      throw new InvalidArgumentError(`must be a whole number from 1 to ${MAX_CONCURRENCY_MAX}.`);
    return n;
  });
}

/** A trigger's or backfill's flags for what its runs send instead of the job's own. */
interface OverrideFlags {
  payload?: string;
  header?: string[];
}

function overrideOptions(cmd: Command, what: 'run' | 'runs'): Command {
  return cmd
    .option(
      '--payload <json>',
      `JSON the ${what === 'run' ? 'run sends' : 'runs send'} as \`payload\` instead of the job's`,
    )
    .option(
      '--header <name=value>',
      `a header the ${what === 'run' ? 'run adds' : 'runs add'} to the job's, replacing one of the same name (repeatable)`,
      collect,
    );
}

/** The request fields of OverrideFlags; a malformed flag is a usage error naming it. */
function overridesOf(o: OverrideFlags): Obj {
  const out: Obj = {};
  if (o.payload !== undefined) {
    try {
      JSON.parse(o.payload);
    } catch {
      throw new UsageError(`--payload: not JSON: ${o.payload}`);
    }
    out['payloadJson'] = o.payload;
  }
  if (o.header !== undefined) {
    const headers: Obj = {};
    for (const h of o.header) {
      const at = h.indexOf('=');
      if (at <= 0) throw new UsageError(`--header: '${h}' is not name=value`);
      headers[h.slice(0, at)] = h.slice(at + 1);
    }
    out['headers'] = headers;
  }
  return out;
}

/**
 * The definition flags. On create a flag left out takes the default its help names; on update
 * it keeps the job's current value, so update's help names no defaults.
 */
function specOptions(cmd: Command, mode: 'create' | 'update'): Command {
  const dflt = (text: string): string => (mode === 'create' ? ` (default ${text})` : '');
  const create = mode === 'create';
  tenantOption(
    cmd,
    create ? 'tenant that owns the job' : "the job's tenant (it cannot be changed)",
  );
  return cmd
    .option('--name <text>', 'a human name')
    .option(
      '--schedule <text>',
      `cron (5 or 6 fields), 'every 90s' or 'at 2025-07-01T09:00:00Z'${create ? ' (required)' : ''}`,
    )
    .option('--tz <zone>', `IANA time zone the schedule is read in${dflt('UTC')}`)
    .option(
      '--anchor <instant>',
      `ISO instant an 'every' schedule counts from${dflt('the creation time')}`,
    )
    .option(
      '--url <url>',
      `webhook URL fired at every slot, or worker:<pool>[?tags=a,b] to lease each run to a pull-based worker${create ? ' (required)' : ''}`,
    )
    .option(
      '--header <name=value>',
      `extra webhook header (repeatable${create ? '' : '; added to the current ones'})`,
      collect,
    )
    .option('--payload <json>', `JSON sent as \`payload\` in the webhook body${dflt('{}')}`)
    .addOption(
      choiceOption(
        '--delivery <mode>',
        `delivery guarantee${dflt('at_least_once')}`,
        DELIVERY_CHOICES,
      ),
    )
    .option('--max-attempts <n>', `delivery attempts before a run is DEAD${dflt('5')}`)
    .option('--deadline-ms <ms>', `deadline of one attempt${dflt('30000')}`)
    .addOption(
      choiceOption(
        '--misfire <policy>',
        `what a late slot does${dflt('fire_once')}`,
        MISFIRE_CHOICES,
      ),
    )
    .addOption(
      choiceOption(
        '--overlap <policy>',
        `what a slot does while the job has --max-concurrency runs in flight${dflt('allow')}` +
          (create ? '' : "; allow drops the job's --max-concurrency"),
        OVERLAP_CHOICES,
      ),
    )
    .addOption(
      maxConcurrencyOption(
        `most runs of the job in flight at once, 1-${MAX_CONCURRENCY_MAX}: under --overlap skip a ` +
          'slot that finds that many is SKIPPED (run_in_flight), under buffer_one or buffer_all ' +
          `it waits; not with allow, which places no limit${dflt('1 with skip and buffer_*')}`,
      ),
    )
    .option('--priority <0-3>', `0 is first${dflt('2')}`)
    .option('--start <instant>', 'no slot before this ISO instant')
    .option('--end <instant>', 'no slot after this ISO instant')
    .option('--fires <n>', 'end after this many fires')
    .option(
      '--completion-timeout <duration>',
      'a 202 answer leaves the run RUNNING until `runs complete` within this long (e.g. 10m)' +
        (create ? '' : "; 'off': a 202 is a success again"),
    )
    .option(
      '--depends-on <job-ids>',
      'comma-separated job ids of the tenant: each slot runs once their runs of it succeeded' +
        (create ? '' : "; '' drops them"),
    )
    .addOption(
      choiceOption(
        '--on-upstream-failure <policy>',
        `what a slot does when an upstream's run did not succeed${dflt('skip')}`,
        UPSTREAM_FAILURE_CHOICES,
      ),
    );
}

/** Flags that change a definition: `jobs update` with none of them has nothing to do. */
const SPEC_FLAG_KEYS: readonly (keyof SpecFlags)[] = [
  'name',
  'schedule',
  'tz',
  'anchor',
  'url',
  'header',
  'payload',
  'delivery',
  'maxAttempts',
  'deadlineMs',
  'misfire',
  'overlap',
  'maxConcurrency',
  'priority',
  'start',
  'end',
  'fires',
  'completionTimeout',
  'dependsOn',
  'onUpstreamFailure',
];

/** The flags given, laid over `base` (a JobSpec message), as a JobSpec message. */
export function specFrom(flags: SpecFlags, base: Obj = {}): Obj {
  const spec: Obj = { ...base };
  const sub = (key: string): Obj => {
    const v = spec[key];
    const o: Obj = typeof v === 'object' && v !== null ? { ...(v as Obj) } : {};
    spec[key] = o;
    return o;
  };
  if (flags.tenant !== undefined) spec['tenant'] = flags.tenant;
  if (flags.name !== undefined) spec['name'] = flags.name;
  if (flags.schedule !== undefined) spec['schedule'] = flags.schedule;
  if (flags.tz !== undefined) spec['timezone'] = flags.tz;
  if (flags.anchor !== undefined) spec['anchorMs'] = instant('--anchor', flags.anchor);
  if (flags.url !== undefined) sub('target')['url'] = flags.url;
  if (flags.header !== undefined) {
    const target = sub('target');
    const headers: Obj = { ...((target['headers'] as Obj | undefined) ?? {}) };
    for (const h of flags.header) {
      const at = h.indexOf('=');
      if (at <= 0) throw new UsageError(`--header: '${h}' is not name=value`);
      headers[h.slice(0, at)] = h.slice(at + 1);
    }
    target['headers'] = headers;
  }
  if (flags.payload !== undefined) {
    try {
      JSON.parse(flags.payload);
    } catch {
      throw new UsageError(`--payload: not JSON: ${flags.payload}`);
    }
    spec['payloadJson'] = flags.payload;
  }
  if (flags.delivery !== undefined)
    spec['delivery'] = enumValue(flags.delivery, 'DELIVERY_SEMANTICS_');
  if (flags.maxAttempts !== undefined)
    sub('retry')['maxAttempts'] = wholeNumber('--max-attempts', flags.maxAttempts, 1);
  if (flags.deadlineMs !== undefined)
    spec['attemptDeadlineMs'] = wholeNumber('--deadline-ms', flags.deadlineMs, 1);
  if (flags.misfire !== undefined)
    sub('misfire')['policy'] = enumValue(flags.misfire, 'MISFIRE_POLICY_');
  if (flags.overlap !== undefined)
    sub('overlap')['policy'] = enumValue(flags.overlap, 'OVERLAP_POLICY_');
  if (flags.maxConcurrency !== undefined) sub('overlap')['maxConcurrency'] = flags.maxConcurrency;
  const overlap = spec['overlap'] as Obj | undefined;
  const policy = overlap?.['policy'];
  const unlimited = policy === undefined || policy === 'OVERLAP_POLICY_ALLOW';
  if (unlimited && overlap?.['maxConcurrency'] !== undefined) {
    // Said here, naming the flag, rather than sent for the API to refuse.
    if (flags.maxConcurrency !== undefined)
      throw new UsageError(
        '--max-concurrency: overlap policy allow places no limit on runs in flight; give --overlap skip, buffer_one or buffer_all with it',
      );
    // `jobs update --overlap allow` of a job with a limit: the limit belonged to the policy
    // being replaced, and allow takes none (the API would refuse the two together).
    spec['overlap'] = Object.fromEntries(
      Object.entries(overlap).filter(([key]) => key !== 'maxConcurrency'),
    );
  }
  if (flags.priority !== undefined) spec['priority'] = wholeNumber('--priority', flags.priority);
  if (flags.start !== undefined) spec['startAtMs'] = instant('--start', flags.start);
  if (flags.end !== undefined) spec['endAtMs'] = instant('--end', flags.end);
  if (flags.fires !== undefined) spec['remainingFires'] = wholeNumber('--fires', flags.fires, 1);
  if (flags.completionTimeout !== undefined) {
    const target = sub('target');
    if (flags.completionTimeout === 'off') delete target['completionTimeoutMs'];
    else
      target['completionTimeoutMs'] = durationMs('--completion-timeout', flags.completionTimeout);
  }
  if (flags.dependsOn !== undefined) {
    const ids = flags.dependsOn
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    spec['dependsOn'] = ids;
    if (ids.length === 0) spec['onUpstreamFailure'] = 'UPSTREAM_FAILURE_POLICY_UNSPECIFIED';
  }
  if (flags.onUpstreamFailure !== undefined)
    spec['onUpstreamFailure'] = enumValue(flags.onUpstreamFailure, 'UPSTREAM_FAILURE_POLICY_');
  return spec;
}

/** The overlap policy and its limit as `jobs get` prints them (absent: the policy's default). */
function overlapText(overlap: Obj): string {
  const policy = enumText(overlap['policy'], 'OVERLAP_POLICY_', true);
  if (policy === 'allow') return policy;
  const max = overlap['maxConcurrency'];
  return `${policy} (max concurrency ${typeof max === 'number' ? max : 1})`;
}

function jobRows(jobs: Obj[]): string[][] {
  return jobs.map((j) => {
    const spec = (j['spec'] ?? {}) as Obj;
    return [
      text(j['id']),
      text(spec['tenant'] ?? ''),
      `${text(spec['schedule'] ?? '')}${spec['timezone'] && spec['timezone'] !== 'UTC' ? ` (${text(spec['timezone'])})` : ''}`,
      j['paused'] === true ? 'paused' : j['nextFireAtMs'] === undefined ? 'finished' : 'active',
      iso(j['nextFireAtMs']),
      text(j['version']),
    ];
  });
}

const JOB_HEADER = ['ID', 'TENANT', 'SCHEDULE', 'STATE', 'NEXT FIRE', 'VERSION'];

function showJob(run: CliRun, opts: RemoteOptions, job: Obj): void {
  if (opts.json === true) return printJson(run, job);
  table(run, JOB_HEADER, jobRows([job]));
}

export function registerJobsCommand(program: Command, run: CliRun): void {
  const jobs = new Command('jobs').description('create, inspect and operate jobs');
  jobs.addHelpText('after', EXIT_CODES_HELP);

  remote(specOptions(jobs.command('create'), 'create'))
    .description('create a job (idempotent with --request-id)')
    .argument('<job-id>', 'the job id: 1-128 of A-Z a-z 0-9 _ . -')
    .option('--request-id <id>', 'retrying with the same id returns the job created first')
    .action(async (jobId: string, o: SpecFlags & RemoteOptions & { requestId?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('JobService', 'CreateJob', {
          jobId,
          requestId: o.requestId ?? '',
          spec: specFrom({ ...o, tenant: tenantOf(o) }),
        });
        if (o.json === true) return printJson(run, res);
        if (res['duplicate'] === true)
          run.io.writeOut('(request id seen before: nothing new created)\n');
        showJob(run, o, res['job'] as Obj);
      }),
    );

  remote(tenantOption(jobs.command('get'), "the job's tenant"))
    .description('show a job (with --json: every field of its definition)')
    .argument('<job-id>')
    .action(async (jobId: string, o: RemoteOptions & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const job = await c.call<Obj>('JobService', 'GetJob', { jobId, tenant: tenantOf(o) });
        if (o.json === true) return printJson(run, job);
        showJob(run, o, job);
        const spec = job['spec'] as Obj;
        const target = spec['target'] as Obj;
        run.io.writeOut(
          [
            `url:       ${text(target['url'])}`,
            `delivery:  ${enumText(spec['delivery'], 'DELIVERY_SEMANTICS_', true)}`,
            `misfire:   ${enumText((spec['misfire'] as Obj)['policy'], 'MISFIRE_POLICY_', true)}`,
            `overlap:   ${overlapText(spec['overlap'] as Obj)}`,
            `priority:  ${text(spec['priority'])}`,
            `group:     ${text(job['groupId'])}`,
          ].join('\n') + '\n',
        );
      }),
    );

  remote(tenantOption(jobs.command('list'), 'tenant whose jobs to list'))
    .description("list a tenant's jobs by id, across every group")
    .option('--page-size <n>', 'jobs per page (1-1000)', '100')
    .option('--page-token <token>', 'continue after a previous page')
    .option('--all', 'follow page tokens to the end')
    .action(
      async (
        o: RemoteOptions & { tenant?: string; pageSize: string; pageToken?: string; all?: boolean },
      ) =>
        withClient(run, o, async (c) => {
          const tenant = tenantOf(o);
          const pageSize = wholeNumber('--page-size', o.pageSize, 1);
          const all: Obj[] = [];
          let token = o.pageToken ?? '';
          for (;;) {
            const res = await c.call<Obj>('JobService', 'ListJobs', {
              tenant,
              pageSize,
              pageToken: token,
            });
            all.push(...(res['jobs'] as Obj[]));
            token = text(res['nextPageToken'] ?? '');
            if (o.all !== true || token === '') break;
          }
          if (o.json === true) return printJson(run, { jobs: all, nextPageToken: token });
          table(run, JOB_HEADER, jobRows(all));
          if (token !== '') run.io.writeErr(`more: --page-token ${token}\n`);
        }),
    );

  remote(specOptions(jobs.command('update'), 'update'))
    .description(
      "change a job's definition: the flags given replace those fields, the others keep their " +
        'current values (at least one flag besides --tenant; the tenant cannot be changed)',
    )
    .argument('<job-id>')
    .option('--force', 'write even if the job changed since it was read (no version check)')
    .action(async (jobId: string, o: SpecFlags & RemoteOptions & { force?: boolean }) =>
      withClient(run, o, async (c) => {
        if (!SPEC_FLAG_KEYS.some((k) => o[k] !== undefined))
          throw new UsageError(
            'nothing to change: give at least one of --name, --schedule, --tz, --anchor, --url, --header, --payload, --delivery, --max-attempts, --deadline-ms, --misfire, --overlap, --max-concurrency, --priority, --start, --end, --fires, --completion-timeout, --depends-on, --on-upstream-failure',
          );
        const tenant = tenantOf(o);
        const current = await c.call<Obj>('JobService', 'GetJob', { jobId, tenant });
        // The tenant names the job (its definition's tenant is that one: it cannot change).
        const req: Obj = { jobId, tenant, spec: specFrom(o, current['spec'] as Obj) };
        if (o.force !== true) req['expectedVersion'] = current['version'];
        showJob(run, o, await c.call<Obj>('JobService', 'UpdateJob', req));
      }),
    );

  for (const [name, method, what] of [
    ['pause', 'PauseJob', 'pause a job: no run starts until it is resumed'],
    ['resume', 'ResumeJob', 'resume a job from now on (slots missed while paused do not fire)'],
  ] as const) {
    remote(tenantOption(jobs.command(name), "the job's tenant"))
      .description(what)
      .argument('<job-id>')
      .action(async (jobId: string, o: RemoteOptions & { tenant?: string }) =>
        withClient(run, o, async (c) =>
          showJob(run, o, await c.call<Obj>('JobService', method, { jobId, tenant: tenantOf(o) })),
        ),
      );
  }

  remote(tenantOption(jobs.command('delete'), "the job's tenant"))
    .description('delete a job; its runs not yet attempted are cancelled')
    .argument('<job-id>')
    .action(async (jobId: string, o: RemoteOptions & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('JobService', 'DeleteJob', { jobId, tenant: tenantOf(o) });
        if (o.json === true) printJson(run, res);
        else run.io.writeOut(`deleted ${jobId}\n`);
      }),
    );

  remote(overrideOptions(tenantOption(jobs.command('trigger'), "the job's tenant"), 'run'))
    .description('fire a job now, outside its schedule')
    .argument('<job-id>')
    .action(async (jobId: string, o: RemoteOptions & OverrideFlags & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('JobService', 'TriggerJob', {
          jobId,
          tenant: tenantOf(o),
          ...overridesOf(o),
        });
        if (o.json === true) printJson(run, res);
        else run.io.writeOut(`triggered: run ${text((res['run'] as Obj)['fireId'])}\n`);
      }),
    );

  remote(overrideOptions(tenantOption(jobs.command('backfill'), "the job's tenant"), 'runs'))
    .description('create a run for every slot of the schedule in [--from, --to)')
    .argument('<job-id>')
    .requiredOption('--from <instant>', 'first instant of the range (ISO)')
    .requiredOption('--to <instant>', 'end of the range, exclusive, not in the future (ISO)')
    .action(
      async (
        jobId: string,
        o: RemoteOptions & OverrideFlags & { tenant?: string; from: string; to: string },
      ) =>
        withClient(run, o, async (c) => {
          const res = await c.call<Obj>('JobService', 'BackfillJob', {
            jobId,
            tenant: tenantOf(o),
            fromMs: instant('--from', o.from),
            toMs: instant('--to', o.to),
            ...overridesOf(o),
          });
          if (o.json === true) return printJson(run, res);
          const slots = res['slotsMs'] as number[];
          run.io.writeOut(
            `${slots.length} run(s) created\n${slots.map((s) => `${iso(s)}\n`).join('')}`,
          );
        }),
    );

  remote(jobs.command('preview'))
    .description('next fire times of a schedule, computed by the cluster; creates nothing')
    .argument('<schedule>', "cron, 'every 90s' or 'at 2025-07-01T09:00:00Z'")
    .option('--tz <zone>', 'IANA time zone', 'UTC')
    .option('--count <n>', 'how many (1-1000)', '5')
    .option('--from <instant>', 'fires strictly after this ISO instant (default now)')
    .action(
      async (schedule: string, o: RemoteOptions & { tz: string; count: string; from?: string }) =>
        withClient(run, o, async (c) => {
          const req: Obj = { schedule, timezone: o.tz, count: wholeNumber('--count', o.count, 1) };
          if (o.from !== undefined) req['fromMs'] = instant('--from', o.from) + 1;
          const res = await c.call<Obj>('JobService', 'PreviewSchedule', req);
          if (o.json === true) return printJson(run, res);
          run.io.writeOut((res['fireTimes'] as string[]).map((s) => `${s}\n`).join(''));
        }),
    );

  registerJobGraphCommand(jobs, run);
  program.addCommand(jobs);
}
