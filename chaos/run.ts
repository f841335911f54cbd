/**
 * A whole chaos run (docs/chaos.md): a proxied cluster of real `tickraft serve` processes, the
 * webhook sink in its own process, the workload, the nemesis schedule, the final heal and reads,
 * then the checker. Everything lands in one run directory: the three history files, the node
 * logs, the report, and the command that replays the run.
 *
 * The run itself is `runChaos` (used by the test in test/chaos/short-run.test.ts); the command
 * line is `npm run chaos -- --time 600 --seed S [--nemesis kill,pause,partition,clock,…]`.
 */
import { Command } from 'commander';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Toxiproxy } from 'toxiproxy-node-client';
import { ApiClient } from '../src/api/client.js';
import { ProxiedCluster } from '../test/helpers/proxied-cluster.js';
import { eventually, TEST_ADMIN_TOKEN } from '../test/helpers/cluster.js';
import { nodeCommand } from '../test/helpers/node-child.js';
import { checkHistory, type CheckReport } from './checker/check-history.js';
import { renderSummary } from './checker/summary.js';
import { HISTORY_FORMAT_VERSION, type MetaRecord } from './history/format.js';
import { HistoryWriter, readHistoryFiles } from './history/jsonl.js';
import { findFaketimeLibrary, NodeClocks } from './nemesis/clock.js';
import {
  MEMBERSHIP_NODES_MIN,
  NEMESIS_FAMILIES,
  NemesisRunner,
  type NemesisCounts,
  type NemesisFamily,
} from './nemesis/runner.js';
import { CHAOS_POOL, Workload, type WorkloadCounts } from './workload.js';

export interface ChaosOptions {
  readonly timeSec: number;
  readonly seed: string;
  readonly nemeses: readonly NemesisFamily[];
  /** The run directory (created). */
  readonly dir: string;
  readonly nodes?: number;
  readonly groups?: number;
  /** L, R, δ (see docs/chaos.md for why these values). */
  readonly lagBoundMs?: number;
  readonly recoveryAllowanceMs?: number;
  readonly inFlightSlackMs?: number;
  readonly clockOffsetMaxMs?: number;
  readonly processes?: number;
  readonly jobsPerProcess?: number;
  /** Gap between two membership operations, ms (default 3–10 s). */
  readonly membershipGapMs?: readonly [number, number];
  readonly log?: (line: string) => void;
}

export interface ChaosResult {
  readonly report: CheckReport;
  readonly summary: string;
  readonly workload: WorkloadCounts;
  readonly nemesis: NemesisCounts;
  readonly unreadJobs: number;
  readonly dir: string;
  readonly replay: string;
}

const SINK = fileURLToPath(new URL('./sink.ts', import.meta.url));
const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
/** The tenants' signing secret (whsec_ + 24 bytes). */
const SECRET = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
const TENANTS = ['acme', 'globex', 'initech', 'umbrella'];
const TICK_MS = 50;
const ELECTION_TICKS = 10;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A numeric seed from the text given (numbers are used as they are). */
export function seedNumber(seed: string): number {
  if (/^\d+$/.test(seed)) return Number(seed) >>> 0;
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h;
}

/** Starts a helper process (the sink, the worker) and waits for its ready line. */
async function startHelper(
  what: string,
  script: string,
  args: string[],
  ready: RegExp,
): Promise<{ proc: ChildProcess; said: string }> {
  // The worker calls the cluster with the admin token of the clusters this process starts.
  const env = { ...process.env, TICKRAFT_TOKEN: TEST_ADMIN_TOKEN };
  const proc = spawn(...nodeCommand(['--import', 'tsx', script, ...args], env), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let err = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const said = await new Promise<string>((ok, fail) => {
    let out = '';
    const timer = setTimeout(() => fail(new Error(`${what} did not start: ${err}`)), 60_000);
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        ok(m[1]!);
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`${what} exited ${code}: ${err}`));
    });
  });
  return { proc, said };
}

async function startSink(args: string[]): Promise<{ proc: ChildProcess; url: string }> {
  const { proc, said } = await startHelper('sink', SINK, args, /listening on (\S+)/);
  return { proc, url: said };
}

/** Stops everything a run started, whatever state it is in. */
async function teardown(
  pc: ProxiedCluster,
  clients: ApiClient[],
  sink: ChildProcess,
  worker: ChildProcess | undefined,
): Promise<void> {
  for (const c of clients) c.close();
  for (const p of [sink, worker]) {
    if (p !== undefined && p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  }
  for (const n of pc.cluster.nodes) if (n.paused) n.resume();
  await pc.cleanup();
}

/**
 * Lets deliveries in flight land, then stops the sink or the worker (each closes its history on
 * SIGTERM).
 */
async function stopHelper(proc: ChildProcess): Promise<void> {
  await sleep(1000);
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
}

export function replayCommand(
  o: Pick<ChaosOptions, 'timeSec' | 'seed' | 'nemeses' | 'nodes'>,
): string {
  const nodes = o.nodes === undefined || o.nodes === 3 ? '' : ` --nodes ${o.nodes}`;
  return `npm run chaos -- --time ${o.timeSec} --seed ${o.seed}${nodes} --nemesis ${o.nemeses.join(',')}`;
}

function metaRecord(
  o: ChaosOptions,
  startedAtEpochMs: number,
  t: { L: number; R: number; delta: number },
): MetaRecord {
  return {
    type: 'meta',
    formatVersion: HISTORY_FORMAT_VERSION,
    t: 0,
    seed: o.seed,
    startedAtEpochMs,
    nemeses: [...o.nemeses],
    durationMs: o.timeSec * 1000,
    nodeCount: o.nodes ?? 3,
    lagBoundMs: t.L,
    recoveryAllowanceMs: t.R,
    inFlightSlackMs: t.delta,
    lookAheadMs: 3000,
    misfireThresholdMs: 5000,
    runsRetainedMax: 100,
    ...(o.nemeses.includes('clock') && { clockOffsetMaxMs: clockOffsetMax(o, t.R) }),
    sinkFencing: 'term',
  };
}

/** The bound on clock offsets: below R/4, so a slot a skewed leader fires early is in its window. */
function clockOffsetMax(o: ChaosOptions, R: number): number {
  return o.clockOffsetMaxMs ?? Math.min(3000, R / 4);
}

/** Starts the nodes (logs in the run directory, libfaketime when asked), waits until every
 * node's API address is registered, and creates the tenants. */
async function bringUp(
  pc: ProxiedCluster,
  clients: ApiClient[],
  dir: string,
  clocks: NodeClocks | undefined,
): Promise<void> {
  for (const n of pc.cluster.nodes) {
    n.logPath = join(dir, 'logs', `${n.id}.log`);
    if (clocks) n.env = clocks.envFor(n.id);
  }
  pc.cluster.startAll();
  await pc.cluster.waitReady(120_000);
  // No transparent retries: grpc-js retries an attempt whose stream closed as REFUSED_STREAM on
  // the same node, and when that node has just been killed the caller sees only the retry's
  // ECONNREFUSED, which the workload takes for "never sent" (seed 11: a pause applied though
  // its call was recorded as failed). Without them, a refused connection means no attempt.
  for (const n of pc.cluster.nodes)
    clients.push(
      new ApiClient(
        `${n.host}:${n.apiPort}`,
        5000,
        { 'grpc.enable_retries': 0 },
        { token: pc.cluster.adminToken },
      ),
    );
  await eventually(async () => {
    const st = await clients[0]!.call<Record<string, unknown>>('AdminService', 'ClusterStatus', {});
    const nodes = st['nodes'] as Record<string, unknown>[];
    if (nodes.length !== pc.cluster.nodes.length || nodes.some((n) => n['apiAddress'] === ''))
      throw new Error('API addresses not all registered');
  }, 60_000);
  for (const tenantId of TENANTS)
    await eventually(
      () =>
        clients[0]!
          .call('TenantService', 'CreateTenant', { tenantId, signingSecret: SECRET })
          .catch((err: unknown) => {
            if ((err as { code?: string }).code === 'TENANT_ALREADY_EXISTS') return;
            throw err;
          }),
      30_000,
    );
}

/** Reads the run's four history files and checks them; writes report.json. */
function checkRun(dir: string): { report: CheckReport; summary: string } {
  const read = readHistoryFiles(
    ['driver.jsonl', 'sink.jsonl', 'worker.jsonl', 'nemesis.jsonl'].map((f) => join(dir, f)),
  );
  const report = checkHistory(read.records);
  writeFileSync(join(dir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  return { report, summary: renderSummary(report) };
}

function refuseBadOptions(o: ChaosOptions): void {
  if (o.nemeses.includes('membership') && (o.nodes ?? 3) < MEMBERSHIP_NODES_MIN)
    throw new Error(`the membership nemesis needs ${MEMBERSHIP_NODES_MIN} nodes or more`);
}

export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  refuseBadOptions(o);
  const seed = seedNumber(o.seed);
  const R = o.recoveryAllowanceMs ?? 20_000;
  mkdirSync(join(o.dir, 'logs'), { recursive: true });
  const clocks = o.nemeses.includes('clock')
    ? new NodeClocks(findFaketimeLibrary(), o.dir)
    : undefined;
  const startedAtEpochMs = Math.round(performance.timeOrigin + performance.now());
  const now = (): number => performance.timeOrigin + performance.now() - startedAtEpochMs;
  const driver = new HistoryWriter(join(o.dir, 'driver.jsonl'));
  const nemesisHistory = new HistoryWriter(join(o.dir, 'nemesis.jsonl'));
  const tolerances = { L: o.lagBoundMs ?? 3000, R, delta: o.inFlightSlackMs ?? 3000 };
  driver.append(metaRecord(o, startedAtEpochMs, tolerances));
  const sink = await startSink([
    ...['--history', join(o.dir, 'sink.jsonl'), '--started-at', String(startedAtEpochMs)],
    ...['--secret', SECRET, '--seed', String(seed ^ 0x5eed)],
  ]);
  const pc = await ProxiedCluster.create({
    nodes: o.nodes ?? 3,
    groups: o.groups ?? 8,
    extraArgs: ['--tick-ms', String(TICK_MS), '--election-ticks', String(ELECTION_TICKS)],
  }).catch((err: unknown) => {
    sink.proc.kill('SIGKILL');
    throw err;
  });
  const clients: ApiClient[] = [];
  let workload: Workload | undefined;
  let nemesis: NemesisRunner | undefined;
  let worker: ChildProcess | undefined;
  try {
    await bringUp(pc, clients, o.dir, clocks);
    // The worker finds the nodes (also those the membership nemesis adds) from ClusterStatus.
    worker = (
      await startHelper(
        'worker',
        WORKER,
        [
          ...['--history', join(o.dir, 'worker.jsonl'), '--started-at', String(startedAtEpochMs)],
          ...['--endpoints', pc.cluster.nodes.map((n) => `${n.host}:${n.apiPort}`).join(',')],
          ...['--seed', String(seed ^ 0x3017)],
        ],
        /worker ready on (\S+)/,
      )
    ).proc;
    log(
      `chaos: cluster up, sink at ${sink.url}, worker of pool ${CHAOS_POOL}, ${o.timeSec}s of workload`,
    );
    workload = new Workload({
      seed,
      clients,
      tenants: TENANTS,
      sinkUrl: sink.url,
      workerPool: CHAOS_POOL,
      history: driver,
      now,
      startedAtEpochMs,
      processes: o.processes ?? 6,
      jobsPerProcess: o.jobsPerProcess ?? 10,
    });
    nemesis = new NemesisRunner({
      seed: seed ^ 0xbad,
      families: o.nemeses,
      cluster: pc.cluster,
      net: pc.net,
      toxiproxy: new Toxiproxy(pc.toxiproxy.url),
      clocks,
      clients,
      history: nemesisHistory,
      now,
      electionTimeoutMs: TICK_MS * ELECTION_TICKS * 2,
      clockOffsetMaxMs: clockOffsetMax(o, R),
      membershipGapMs: o.membershipGapMs,
    });
    await Promise.all([workload.run(o.timeSec * 1000), nemesis.run(now() + o.timeSec * 1000)]);
    log('chaos: workload done; final heal (and replica moves finished)');
    await nemesis.healAll();
    await pc.cluster.waitReady(120_000).catch((err: unknown) => log(`chaos: ${String(err)}`));
    await sleep(R);
    log('chaos: final reads');
    const unreadJobs = await workload.finalReads(now() + 180_000);
    await stopHelper(sink.proc);
    await stopHelper(worker);
    driver.close();
    nemesisHistory.close();
    const { report, summary } = checkRun(o.dir);
    const replay = replayCommand(o);
    writeFileSync(join(o.dir, 'replay.txt'), `${replay}\n`);
    return {
      report,
      summary,
      workload: workload.counts,
      nemesis: nemesis.counts,
      unreadJobs,
      dir: o.dir,
      replay,
    };
  } finally {
    workload?.stop();
    nemesis?.stop();
    await teardown(pc, clients, sink.proc, worker);
  }
}

/** The figures printed after the checker's table. */
export function renderCounts(
  r: ChaosResult,
  o: Pick<ChaosOptions, 'seed' | 'nemeses' | 'timeSec'>,
): string {
  const byKind = Object.entries(r.nemesis.byKind)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const m = r.nemesis.membership;
  const membership =
    m === undefined
      ? []
      : [
          `membership: ${
            Object.entries(m.byKind)
              .map(
                ([kind, outcomes]) =>
                  `${kind} ${Object.entries(outcomes)
                    .map(([o, n]) => `${o} ${n}`)
                    .join(' ')}`,
              )
              .join('; ') || 'no operation'
          }; moves started by drains and rebalances ${m.movesStarted}; after the final heal: moves in flight ${r.nemesis.settled?.movesLeft ?? '?'}, groups without 3 replicas ${r.nemesis.settled?.groupsNotAtThree ?? '?'}`,
        ];
  return [
    `seed ${o.seed}   nemeses ${o.nemeses.join(',') || 'none'}   workload ${o.timeSec}s`,
    `operations ok ${r.workload.ok}, fail ${r.workload.fail}, info ${r.workload.info}; jobs created ${r.workload.jobs}; unread at the end ${r.unreadJobs}`,
    `faults ${Object.values(r.nemesis.byKind).reduce((a, b) => a + b, 0)} (${byKind || 'none'}); transfers skipped (no status) ${r.nemesis.transfersSkipped}`,
    ...membership,
    `deliveries ${r.report.counts.deliveries}; run directory ${resolve(r.dir)}`,
    `replay: ${r.replay}`,
  ].join('\n');
}

interface CliFlags {
  readonly time: string;
  readonly seed?: string;
  readonly nemesis: string;
  readonly out?: string;
  readonly nodes?: string;
  readonly lagBound: string;
  readonly recovery: string;
}

function cliFail(message: string): never {
  process.stderr.write(`chaos: ${message}\n`);
  process.exit(2);
}

async function cli(flags: CliFlags): Promise<void> {
  const timeSec = Number(flags.time);
  if (!Number.isSafeInteger(timeSec) || timeSec < 10)
    cliFail(`--time must be whole seconds ≥ 10, got '${flags.time}'`);
  const nemeses: NemesisFamily[] = [];
  for (const name of flags.nemesis
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    if (!(NEMESIS_FAMILIES as readonly string[]).includes(name))
      cliFail(`--nemesis: unknown '${name}'; known: ${NEMESIS_FAMILIES.join(', ')}`);
    nemeses.push(name as NemesisFamily);
  }
  const membership = nemeses.includes('membership');
  // Membership needs a node free of each group; by default the cluster grows to 5 for it.
  const nodes = flags.nodes === undefined ? (membership ? 5 : 3) : Number(flags.nodes);
  if (!Number.isSafeInteger(nodes) || nodes < 1 || nodes > 9)
    cliFail(`--nodes must be a whole number from 1 to 9, got '${flags.nodes}'`);
  if (membership && nodes < MEMBERSHIP_NODES_MIN)
    cliFail(
      `--nemesis membership needs --nodes ${MEMBERSHIP_NODES_MIN} or more (each group has 3 replicas, so replicas need a node to move to); got ${nodes}`,
    );
  const seed = flags.seed ?? String(Date.now() % 1_000_000);
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  const dir = flags.out ?? join('chaos-runs', `${seed}-${stamp}`);
  const o: ChaosOptions = {
    timeSec,
    seed,
    nemeses,
    dir,
    nodes,
    lagBoundMs: Number(flags.lagBound),
    recoveryAllowanceMs: Number(flags.recovery),
  };
  process.stderr.write(`chaos: run directory ${resolve(dir)}\n`);
  const r = await runChaos(o);
  process.stdout.write(`${r.summary}\n\n${renderCounts(r, o)}\n`);
  if (!r.report.ok)
    process.stdout.write(
      `\nThe run FAILED (${r.report.verdict}); history, node logs and report kept in ${resolve(dir)}.\n` +
        `Check it again: npm run chaos:check -- ${join(dir, '*.jsonl')}\nReplay: ${r.replay}\n`,
    );
  process.exitCode = r.report.verdict === 'ok' ? 0 : r.report.verdict === 'violations' ? 1 : 3;
  const unhealthy = unhealthyEnd(r);
  if (unhealthy !== undefined) {
    process.stdout.write(
      `\nThe run FAILED: the cluster did not end healthy (${unhealthy}); node logs kept in ${resolve(dir)}.\nReplay: ${r.replay}\n`,
    );
    if (process.exitCode === 0) process.exitCode = 1;
  }
}

/** With replica moves, the final heal must leave no move in flight and every group at 3. */
export function unhealthyEnd(r: ChaosResult): string | undefined {
  const s = r.nemesis.settled;
  if (s === undefined || (s.movesLeft === 0 && s.groupsNotAtThree === 0)) return undefined;
  const moves = s.movesLeft === -1 ? 'moves in flight unknown' : `${s.movesLeft} move(s) in flight`;
  return `${moves}, ${s.groupsNotAtThree} group(s) without 3 replicas after the final heal`;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await new Command()
    .name('chaos')
    .description(
      'A chaos run: proxied cluster, sink, workload, nemeses, then the checker (docs/chaos.md).',
    )
    .option('--time <sec>', 'length of the workload phase, seconds', '600')
    .option('--seed <s>', 'seed of every draw (workload, nemeses, sink); default: from the clock')
    .option(
      '--nemesis <list>',
      `comma list of ${NEMESIS_FAMILIES.join(', ')}`,
      NEMESIS_FAMILIES.join(','),
    )
    .option('--out <dir>', 'run directory (default chaos-runs/<seed>-<start time>)')
    .option('--nodes <n>', 'cluster size (default 3, or 5 with the membership nemesis)')
    .option('--lag-bound <ms>', 'L: steady-state bound on fire lag', '3000')
    .option('--recovery <ms>', 'R: recovery allowance after each fault', '20000')
    .addHelpText(
      'after',
      '\nExit status: 0 ok, 1 violations, 2 bad flags, 3 not proven (step cap).',
    )
    .action(cli)
    .parseAsync();
}
