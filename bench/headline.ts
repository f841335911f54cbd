/**
 * `npm run bench`: the headline figures in one table, with the machine they were measured on.
 * Figures only, never assertions on speed; the process exits 1 when something is functionally
 * wrong (a registration call failed; a spike, steady, flood, growth or healthy P0 fire never
 * arrived or arrived twice where it must not; a failover slot was lost or a trial could not be set
 * up; an old leader sent a slot after its successor had) and says so.
 *
 * The parts a bare `npm run bench` runs:
 *   registration  jobs/s through the public CreateJobs RPC into a real 3-process cluster
 *   memory        RSS and V8 heap per job per replica after that registration (forced GC)
 *   spike         15,000 and 40,000 jobs due in the same second, next to bare undici clients of
 *                 the same topology (three processes, each sending its node's share) and of one
 *                 process; the whole cluster's CPU per fire (bench/spike.ts)
 *   failover      trials of a group losing its leader (bench/failover.ts), each on a fresh cluster
 *                 whose peer links cross proxies: a busy group and a quiet one, each with its
 *                 leader killed (SIGKILL), isolated (blackhole partition) or paused (SIGSTOP)
 *   cli           tickctl's wall time for --help and one RPC, next to `node -e 0` (bench/cli.ts)
 *   security      registration and a spike with no authentication, with tokens, and with tokens
 *                 and TLS (client API and between nodes), in the same run (bench/security.ts)
 *   noisy         a healthy tenant's P0 webhook lag alone, and while a noisy tenant floods a
 *                 failing endpoint, on one node (bench/noisy.ts)
 * The scale parts, each minutes to tens of minutes, run when named (`--only growth`) or with
 * `--only all`:
 *   growth        one cluster grown to 1M, 2M, 5M, 10M jobs: registration rate, memory per job,
 *                 snapshot size and cost, GC pauses while firing, kill -9 to ready (bench/growth.ts)
 *   steady        3,000 fires/s for 10 minutes from once-a-minute cron jobs in several zones:
 *                 lag per minute, CPU per fire per node, nothing lost or doubled (bench/steady.ts)
 *   flood         N jobs due within one minute next to a bare undici client sending the same
 *                 requests over the same minute, and the fleet 2,000,000 would need (bench/flood.ts)
 *
 * `--help`-style flag list: docs/BENCH.md, which also says how to read the table.
 */
import { parseArgs } from 'node:util';
import { runCli, type CliResult } from './cli.js';
import {
  FAULT_TEXT,
  msText,
  runFailover,
  trialProblems,
  type FailoverResult,
  type FailoverSummary,
  stagesText,
} from './failover.js';
import {
  describeMachine,
  fmt,
  machineContext,
  met,
  type MachineContext,
  type Row,
} from './figures.js';
import {
  DEFAULT_FLOODS,
  FLOODS,
  isFlood,
  lagText,
  runNoisy,
  type Flood,
  type NoisyResult,
} from './noisy.js';
import { floodRows, runFlood, type FloodResult } from './flood.js';
import { runSteady, steadyRows, type SteadyResult } from './steady.js';
import { growthProblems, growthRows, runGrowth, type GrowthResult } from './growth.js';
import { runRegistration, type RegistrationResult } from './registration.js';
import { overhead, runSecurity, type SecurityFigures } from './security.js';
import { runSpike, spikeRows, type SpikeResult } from './spike.js';

/** The parts a bare `npm run bench` runs. */
const DEFAULT_PARTS = [
  'registration',
  'memory',
  'spike',
  'failover',
  'cli',
  'security',
  'noisy',
] as const;
/** The scale parts, each tens of minutes: run when named (`--only growth`, or `--only all`). */
const SCALE_PARTS = ['growth', 'steady', 'flood'] as const;
const PARTS = [...DEFAULT_PARTS, ...SCALE_PARTS] as const;
type Part = (typeof PARTS)[number];

/** Every flag: its default and what it sets (`--help` prints this list). */
const FLAGS = {
  only: [
    DEFAULT_PARTS.join(','),
    `the parts to run, of ${[...DEFAULT_PARTS, ...SCALE_PARTS].join(', ')}; or all`,
  ],
  jobs: ['100000', 'registration: jobs registered (and measured for memory)'],
  inflight: ['8', 'registration and growth: CreateJobs calls in flight'],
  warmup: ['20000', 'registration: jobs registered before the measure (0: fresh nodes)'],
  groups: ['18', 'data groups of each cluster'],
  spike: ['15000,40000', 'spike: the sizes, jobs due in the same second'],
  'spike-warmup': ['5000', 'spike: jobs of a spike fired before the measured one (0: none)'],
  'failover-jobs': ['2000', 'failover: every-second jobs of the busy group'],
  'failover-trials': ['3', 'failover: trials of each group kind × fault'],
  'cli-runs': ['7', 'cli: runs of each command'],
  'security-jobs': ['50000', 'security: jobs each mode registers'],
  'security-spike': ['10000', 'security: the spike each mode fires'],
  'security-trials': ['3', 'security: interleaved rounds of the three modes'],
  'noisy-healthy': ['300', 'noisy: healthy P0 jobs per phase'],
  'noisy-flood': ['2000', 'noisy: noisy jobs per flood phase'],
  'noisy-floods': [
    DEFAULT_FLOODS.join(','),
    `noisy: flood phases after alone, of ${FLOODS.join(', ')}`,
  ],
  'growth-sizes': ['1000000,2000000,5000000,10000000', 'growth: the sizes, ascending'],
  'growth-fire-rate': ['1000', 'growth: one-off jobs due per second while GC pauses are measured'],
  'growth-fire-window': ['30', 'growth: seconds of that firing'],
  'steady-rate': ['3000', 'steady: fires per second'],
  'steady-minutes': ['10', 'steady: measured minutes'],
  flood: ['300000', 'flood: the sizes, jobs due within one minute, each on a fresh cluster'],
} as const satisfies Record<string, readonly [string, string]>;

const USAGE = [
  'npm run bench -- [--only a,b] [--json] [--FLAG N]…',
  '',
  ...Object.entries(FLAGS).map(
    ([name, [dflt, what]]) => `  --${name.padEnd(20)} ${what} (default ${dflt})`,
  ),
  `  --${'json'.padEnd(20)} also print every figure as one JSON line`,
  `  --${'help'.padEnd(20)} this list`,
  '',
  'docs/BENCH.md says what each part measures and how to read the table.',
].join('\n');

function parseFlags(): ReturnType<typeof parse> {
  try {
    return parse();
  } catch (err) {
    // parseArgs's own message names the flag (e.g. "Unknown option '--spikes'").
    console.error(`bench: ${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    process.exit(2);
  }
}

function parse() {
  return parseArgs({
    options: {
      ...(Object.fromEntries(
        Object.entries(FLAGS).map(([name, [dflt]]) => [name, { type: 'string', default: dflt }]),
      ) as Record<keyof typeof FLAGS, { type: 'string'; default: string }>),
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
}

const { values } = parseFlags();
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

function positive(name: string, text: string | undefined, min = 1): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) {
    console.error(`bench: --${name} must be an integer ≥ ${min}, got ${text}`);
    process.exit(2);
  }
  return n;
}

const JOBS = positive('jobs', values.jobs);
const SPIKES = values.spike.split(',').map((s) => positive('spike', s.trim()));
const FAILOVER_JOBS = positive('failover-jobs', values['failover-jobs']);
const FAILOVER_TRIALS = positive('failover-trials', values['failover-trials']);
const FAILOVER_TRIALS_TEXT = `${FAILOVER_TRIALS} trial${FAILOVER_TRIALS === 1 ? '' : 's'}`;
const INFLIGHT = positive('inflight', values.inflight);
const WARMUP = positive('warmup', values.warmup, 0);
const SPIKE_WARMUP = positive('spike-warmup', values['spike-warmup'], 0);
const GROUPS = positive('groups', values.groups);
const CLI_RUNS = positive('cli-runs', values['cli-runs']);
const SECURITY_JOBS = positive('security-jobs', values['security-jobs']);
const SECURITY_SPIKE = positive('security-spike', values['security-spike']);
const SECURITY_TRIALS = positive('security-trials', values['security-trials']);
const NOISY_HEALTHY = positive('noisy-healthy', values['noisy-healthy']);
const NOISY_FLOOD = positive('noisy-flood', values['noisy-flood']);
const NOISY_FLOODS: Flood[] = [];
for (const f of values['noisy-floods'].split(',').map((s) => s.trim()))
  if (isFlood(f)) NOISY_FLOODS.push(f);
  else if (f !== '') {
    console.error(`bench: --noisy-floods takes ${FLOODS.join(', ')}; got ${f}`);
    process.exit(2);
  }
const GROWTH_SIZES = values['growth-sizes']
  .split(',')
  .map((s) => positive('growth-sizes', s.trim()));
if (GROWTH_SIZES.some((n, i) => i > 0 && n <= GROWTH_SIZES[i - 1]!)) {
  console.error(`bench: --growth-sizes must ascend, got ${values['growth-sizes']}`);
  process.exit(2);
}
const GROWTH_FIRE_RATE = positive('growth-fire-rate', values['growth-fire-rate']);
const GROWTH_FIRE_WINDOW = positive('growth-fire-window', values['growth-fire-window']);
const STEADY_RATE = positive('steady-rate', values['steady-rate']);
const STEADY_MINUTES = positive('steady-minutes', values['steady-minutes']);
const FLOOD_SIZES = values.flood.split(',').map((s) => positive('flood', s.trim()));
const only = new Set(values.only === 'all' ? PARTS : values.only.split(',').map((s) => s.trim()));
for (const p of only)
  if (!(PARTS as readonly string[]).includes(p)) {
    console.error(`bench: --only takes all or some of ${PARTS.join(', ')}; got ${p}`);
    process.exit(2);
  }
const runs = (p: Part): boolean => only.has(p);

// The nodes run as `tickraft serve` does in production (no V8 heap flags: a 2,000,000-job node
// uses under 400 MiB of V8's default 4 GiB limit), plus --expose-gc, so that the memory figure
// is measured after a full collection. TICKRAFT_NODE_ARGS adds flags; the run prints them.
const nodeArgs = new Set((process.env['TICKRAFT_NODE_ARGS'] ?? '').split(' ').filter((a) => a));
nodeArgs.add('--expose-gc');
process.env['TICKRAFT_NODE_ARGS'] = [...nodeArgs].join(' ');
/** How long the memory part leaves the cluster idle before its second measure. */
const SETTLE_MS = 30_000;

const problems: string[] = [];
const log = (line: string): void => console.log(line);
const machineBefore = machineContext();
log(`machine: ${describeMachine(machineBefore)}`);
log(`node flags of the cluster processes: ${process.env['TICKRAFT_NODE_ARGS']}`);

let registration: RegistrationResult | undefined;
const spikes: SpikeResult[] = [];
let failover: FailoverResult | undefined;
let cli: CliResult | undefined;
let security: SecurityFigures[] | undefined;
let tokenCheck: { bootstrapUs: number; storedUs: number } | undefined;
let noisy: NoisyResult | undefined;
let growth: GrowthResult | undefined;
let steady: SteadyResult | undefined;
let flood: FloodResult | undefined;

if (runs('registration') || runs('memory')) {
  log(`\nbulk registration: ${fmt(JOBS)} jobs, CreateJobs batches of 1,000, ${INFLIGHT} in flight`);
  registration = await runRegistration({
    jobs: JOBS,
    groups: GROUPS,
    batch: 1000,
    inflight: INFLIGHT,
    warmupJobs: WARMUP,
    settleMs: runs('memory') ? SETTLE_MS : 0,
    log,
  });
  if (registration.failedCalls > 0 || registration.created !== JOBS)
    problems.push(
      `registration: ${fmt(registration.created)} of ${fmt(JOBS)} jobs created, ${registration.failedCalls} calls failed: ${registration.errors.join('; ')}`,
    );
}
if (runs('spike'))
  for (const size of SPIKES) {
    log(`\n:00 spike: ${fmt(size)} jobs due in the same second`);
    const spike = await runSpike({ jobs: size, groups: GROUPS, warmup: SPIKE_WARMUP, log });
    spikes.push(spike);
    if (spike.tickraft.received < size)
      problems.push(
        `spike: ${fmt(spike.tickraft.received)} of ${fmt(size)} fires reached the sink within 60 s`,
      );
  }
if (runs('cli')) {
  log(`\ntickctl start-up: ${CLI_RUNS} runs of each command, each a fresh process`);
  cli = await runCli({ runs: CLI_RUNS, log });
  if (cli.error !== undefined) problems.push(`cli: ${cli.error}`);
}
if (runs('failover')) {
  log(
    `\nfailover: ${FAILOVER_TRIALS_TEXT} of each group kind (busy: ${fmt(FAILOVER_JOBS)} every-second jobs; quiet: 1 job every 10 s) × fault (kill -9, isolate, SIGSTOP its leader), each on a fresh proxied cluster`,
  );
  failover = await runFailover({
    jobs: FAILOVER_JOBS,
    groups: GROUPS,
    trials: FAILOVER_TRIALS,
    log,
  });
  for (const t of failover.trials) problems.push(...trialProblems(t));
}
if (runs('security')) {
  log('\nauthentication and TLS: the same registration and spike with each off and on');
  const measured = await runSecurity({
    jobs: SECURITY_JOBS,
    spikeJobs: SECURITY_SPIKE,
    groups: GROUPS,
    trials: SECURITY_TRIALS,
    log,
  });
  security = measured.modes;
  tokenCheck = measured.check;
  for (const f of security) {
    if (f.created !== SECURITY_JOBS)
      problems.push(
        `security (${f.mode}): ${fmt(f.created)} of ${fmt(SECURITY_JOBS)} jobs created`,
      );
    if (f.received < SECURITY_SPIKE)
      problems.push(
        `security (${f.mode}): ${fmt(f.received)} of ${fmt(SECURITY_SPIKE)} spike fires arrived`,
      );
  }
}
if (runs('noisy')) {
  log(
    `\nnoisy neighbour: a healthy tenant's P0 lag alone, then under floods of ${NOISY_FLOODS.join(', ')}`,
  );
  noisy = await runNoisy({
    healthyJobs: NOISY_HEALTHY,
    floodJobs: NOISY_FLOOD,
    floods: NOISY_FLOODS,
    groups: GROUPS,
    log,
  });
  for (const e of noisy.errors) problems.push(`noisy: ${e}`);
  for (const p of noisy.phases)
    if (p.received < p.expected)
      problems.push(
        `noisy (${p.phase}): ${fmt(p.received)} of ${fmt(p.expected)} healthy P0 fires reached the sink within ${fmt(noisy.waitMs / 1000)} s of their window's end`,
      );
}
if (runs('growth')) {
  log(
    `\ngrowth: one cluster grown to ${GROWTH_SIZES.map(fmt).join(', ')} jobs; at each size memory, GC pauses while firing ${fmt(GROWTH_FIRE_RATE)}/s for ${GROWTH_FIRE_WINDOW} s, a node's kill -9 and restart, snapshots`,
  );
  growth = await runGrowth({
    sizes: GROWTH_SIZES,
    groups: GROUPS,
    inflight: INFLIGHT,
    fireRate: GROWTH_FIRE_RATE,
    fireWindowS: GROWTH_FIRE_WINDOW,
    log,
  });
  problems.push(...growthProblems(growth));
}
if (runs('steady')) {
  log(`\nsteady: ${fmt(STEADY_RATE)} fires/s for ${STEADY_MINUTES} minutes`);
  steady = await runSteady({ rate: STEADY_RATE, minutes: STEADY_MINUTES, groups: GROUPS, log });
  problems.push(...steady.problems);
}
if (runs('flood')) {
  log(`\nflood: ${FLOOD_SIZES.map(fmt).join(', ')} jobs due within one minute`);
  flood = await runFlood({ jobs: FLOOD_SIZES, groups: GROUPS, log });
  problems.push(...flood.problems);
}
const machineAfter = machineContext();

const rows: Row[] = [];
if (registration && runs('registration')) {
  const r = registration;
  rows.push(
    {
      figure: `bulk registration (${fmt(r.jobs)} jobs, ${INFLIGHT} calls in flight)`,
      measured: `${fmt(r.jobsPerSec)} jobs/s`,
      target: '≥ 50,000 jobs/s',
      met: met(r.jobsPerSec >= 50_000),
    },
    ...(r.warmup === undefined
      ? []
      : [
          {
            figure: `  before it, on fresh nodes (${fmt(r.warmup.jobs)} jobs)`,
            measured: `${fmt(r.warmup.jobsPerSec)} jobs/s, ${fmt(r.warmup.clusterCpuUsPerJob)} µs CPU per job`,
            target: '',
            met: '',
          },
        ]),
    {
      figure: '  per CreateJobs call (1,000 jobs) p50 / p99',
      measured: `${fmt(r.batchP50Ms)} / ${fmt(r.batchP99Ms)} ms`,
      target: '',
      met: '',
    },
    {
      figure: '  cluster CPU per job (3 nodes)',
      measured: `${fmt(r.clusterCpuUsPerJob)} µs`,
      target: '',
      met: '',
    },
    {
      figure: '  batches retried / groups that changed leader',
      measured: `${r.retriedBatches} / ${r.leaderChanges}`,
      target: '',
      met: '',
    },
  );
}
if (registration && runs('memory')) {
  const m = registration.memory;
  const at = `at ${fmt(registration.created)} jobs${m.gcForced ? '' : ', GC not forced'}`;
  const judge = (b: number): string =>
    registration.created >= 2_000_000
      ? met(b <= 250)
      : `${met(b <= 250)} (at ${fmt(registration.created)})`;
  rows.push(
    {
      figure: `memory per job per replica, V8 heap (${at})`,
      measured: `${fmt(m.heapPerJobReplica)} B`,
      target: '≤ 250 B at 2,000,000 jobs',
      met: judge(m.heapPerJobReplica),
    },
    {
      figure: `memory per job per replica, RSS (${at})`,
      measured: `${fmt(m.rssPerJobReplica)} B`,
      target: '≤ 250 B at 2,000,000 jobs',
      met: judge(m.rssPerJobReplica),
    },
  );
  if (m.settled)
    rows.push({
      figure: `  the same after ${fmt(m.settled.afterMs / 1000)} s idle: heap / RSS`,
      measured: `${fmt(m.settled.heapPerJobReplica)} / ${fmt(m.settled.rssPerJobReplica)} B`,
      target: '',
      met: '',
    });
}
for (const s of spikes) rows.push(...spikeRows(s));
if (failover) {
  rows.push({
    figure: `failover: p50 / worst of ${FAILOVER_TRIALS_TEXT} each, a fresh cluster per trial`,
    measured: '',
    target: '',
    met: '',
  });
  for (const f of failover.summaries) {
    rows.push(failoverRow(f, failover.jobs));
    if (f.completed > 0)
      rows.push({
        figure: '    where the new leader’s time went (p50 of each stage)',
        measured: stagesText(f.stagesP50),
        target: '',
        met: '',
      });
  }
}

if (cli && cli.error === undefined) {
  const floor = cli.timings[0]!;
  for (const [i, x] of cli.timings.entries())
    rows.push({
      figure: i === 0 ? `tickctl start-up (median of ${cli.runs}): ${x.what}` : `  ${x.what}`,
      measured:
        i === 0
          ? `${fmt(Math.round(x.medianMs))} ms`
          : `${fmt(Math.round(x.medianMs))} ms (${(x.medianMs / floor.medianMs).toFixed(1)}× node -e 0)`,
      target: x.what.startsWith('tickctl jobs get') ? '≤ 300 ms' : '',
      met: x.what.startsWith('tickctl jobs get') ? met(x.medianMs <= 300) : '',
    });
  if (!cli.bundled)
    rows.push({
      figure: '  (bin/tickctl ran the sources through tsx: dist/ stale)',
      measured: '',
      target: '',
      met: '',
    });
}

if (security && tokenCheck) {
  const base = security[0]!;
  // The check runs once per call: against one CreateJobs call of the auth mode (1,000 jobs).
  const auth = security.find((f) => f.mode === 'auth') ?? base;
  const share = (tokenCheck.storedUs / (auth.batchP50Ms * 1000)) * 100;
  rows.push({
    figure: 'security: the token check per RPC (bootstrap / stored token), in-process',
    measured: `${tokenCheck.bootstrapUs.toFixed(2)} / ${tokenCheck.storedUs.toFixed(2)} µs = ${share.toFixed(4)} % of a CreateJobs call (${fmt(auth.batchP50Ms)} ms)`,
    target: '≤ 5 %',
    met: met(share <= 5),
  });
  for (const f of security) {
    const first = f === base;
    rows.push(
      {
        figure: `  ${f.mode}: registration (${fmt(SECURITY_JOBS)} jobs, median of ${SECURITY_TRIALS}); vs off`,
        measured: `${fmt(f.jobsPerSec)} jobs/s, ${fmt(f.cpuUsPerJob)} µs CPU/job${first ? '' : `; ${overhead(f.jobsPerSec, base.jobsPerSec, true)}`}`,
        target: '',
        met: '',
      },
      {
        figure: `    ${f.mode}: spike (${fmt(SECURITY_SPIKE)}) last fire / bare client; vs off`,
        measured: `${f.spikeDrainRatio.toFixed(2)}× (p99 ${f.spikeP99Ratio.toFixed(2)}×)${first ? '' : `; ${overhead(f.spikeDrainRatio, base.spikeDrainRatio, false)}`}`,
        target: '',
        met: '',
      },
    );
  }
}

if (noisy) {
  for (const p of noisy.phases) {
    const lag = (ms: number): string => lagText(ms, p.waitedMs);
    const flood = p.phase !== 'alone';
    rows.push({
      figure: flood
        ? `  under a flood of ${fmt(p.floodJobs)} jobs at ${p.what}`
        : `noisy neighbour: healthy P0 lag p50 / p99 / max, alone (${fmt(p.expected)} jobs over ${fmt(noisy.windowMs / 1000)} s, 1 node)`,
      measured: `${lag(p.lagP50Ms)} / ${lag(p.lagP99Ms)} / ${lag(p.lagMaxMs)} ms, ${fmt(p.received)}/${fmt(p.expected)} received`,
      target: flood ? 'healthy P0 lag p99 < 1 s under a flood' : '',
      met: flood ? met(p.lagP99Ms < 1000) : '',
    });
  }
}

if (growth) rows.push(...growthRows(growth));
if (steady) rows.push(...steadyRows(steady));
if (flood) rows.push(...floodRows(flood));

log('');
printTable(machineBefore, machineAfter, rows);
for (const p of problems) console.log(`FUNCTIONAL FAILURE: ${p}`);
if (values.json)
  console.log(
    JSON.stringify({
      machineBefore,
      machineAfter,
      rows,
      registration,
      spikes,
      failover,
      cli,
      security,
      tokenCheck,
      noisy,
      growth,
      steady,
      flood,
      problems,
    }),
  );
process.exitCode = problems.length > 0 ? 1 : 0;

function printTable(before: MachineContext, after: MachineContext, table: readonly Row[]): void {
  const head: Row = { figure: 'figure', measured: 'measured', target: 'target', met: 'met' };
  const all = [head, ...table];
  const w = (k: keyof Row): number => Math.max(...all.map((r) => r[k].length));
  const line = (r: Row): string =>
    `| ${r.figure.padEnd(w('figure'))} | ${r.measured.padEnd(w('measured'))} | ${r.target.padEnd(w('target'))} | ${r.met.padEnd(w('met'))} |`;
  console.log(
    `machine: ${before.cpus} × ${before.cpuModel}, ${before.ramGiB} GiB RAM, node ${before.node}`,
  );
  console.log(
    `load average (1/5/15 min): before ${before.load.join(' ')}, after ${after.load.join(' ')}`,
  );
  console.log(line(head));
  console.log(
    `|${'-'.repeat(w('figure') + 2)}|${'-'.repeat(w('measured') + 2)}|${'-'.repeat(w('target') + 2)}|${'-'.repeat(w('met') + 2)}|`,
  );
  for (const r of table) console.log(line(r));
}

/**
 * One failover combination: resume (quiet groups: the slot lag) and election p50 / worst, and the
 * slots lost and late over its trials.
 */
function failoverRow(f: FailoverSummary, jobs: number): Row {
  const group =
    f.kind === 'busy'
      ? `busy group (${fmt(jobs)} every-second jobs)`
      : 'quiet group (1 job / 10 s)';
  const figure = `  ${group}, ${FAULT_TEXT[f.fault]} its leader`;
  const failed = f.failed > 0 ? `, ${f.failed} trial${f.failed === 1 ? '' : 's'} failed` : '';
  if (f.completed === 0)
    return { figure, measured: `no trial completed${failed}`, target: '', met: 'NO' };
  const pair = (p50: number, worst: number): string =>
    Number.isFinite(worst) ? `${fmt(p50)} / ${msText(worst)}` : `${msText(p50)} / never`;
  const measured =
    `${f.kind === 'busy' ? 'resume' : 'slot lag'} ${pair(f.resumeP50Ms, f.resumeWorstMs)}, ` +
    `elected ${pair(f.electedP50Ms, f.electedWorstMs)}, ` +
    `lost ${fmt(f.lostSlots)} of ${fmt(f.expectedSlots)}, late ${fmt(f.lateSlots)}` +
    (f.fault === 'kill' ? '' : `, lease violations ${f.leaseViolations}`) +
    (f.kind === 'quiet' ? `, quiesced before ${f.quiescedBefore}/${f.completed}` : '') +
    failed;
  const target = `${f.kind === 'busy' ? 'resume' : 'slot lag'} ≤ 1,000 ms worst, lost 0`;
  return {
    figure,
    measured,
    target,
    met: met(f.resumeWorstMs <= 1000 && f.lostSlots === 0 && f.failed === 0),
  };
}
