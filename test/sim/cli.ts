/**
 * `npm run sim -- --seeds N [--from S]` runs N seeds; `npm run sim -- --seed S` replays one and
 * prints its fault counts, the fault windows it reached (window-scenarios.ts) and the tail of
 * its trace. Exit code 1 on any violation.
 * `--scheduler` runs the scheduler simulation (scheduler-sim.ts) instead of the KV one;
 * `--result-hold-ms MS` lets its leaders hold attempt results back while their sends are
 * unanswered (the dispatcher's resultHoldMs).
 * `--host` runs the host simulation (host-sim.ts: the production MultiRaftHost and NodeStore
 * over simulated disks with power loss); `--safety-ms` sets its fault phase.
 */
import { parseArgs } from 'node:util';
import { checkSimHistory } from './history-check.js';
import { runSim, type SimResult } from './cluster-sim.js';
import { runHostSim, type HostSimResult } from './host-sim.js';
import { runSchedulerSim, type SchedSimResult } from './scheduler-sim.js';
import { WINDOW_HITS, WINDOW_KINDS, type WindowCounts } from './window-scenarios.js';

const USAGE = `Usage: npm run sim -- [--scheduler | --host] (--seeds N [--from S] | --seed S [--verbose])
  --seeds N           run N seeds (default 100), from --from S
  --seed S            replay one seed and print its counts (--verbose: its trace tail)
  --scheduler         the scheduler simulation (webhook receiver, scheduler invariants)
  --host              the production host and node store over simulated disks
  --safety-ms MS      virtual ms of the fault phase
  --result-hold-ms MS (--scheduler) leaders hold attempt results back this long
  --tail N            trace lines kept for a failure report (default 80)`;

function parseCli(): ReturnType<typeof parseOptions> {
  try {
    const parsed = parseOptions();
    for (const name of ['seed', 'seeds', 'from', 'safety-ms', 'tail', 'result-hold-ms'] as const) {
      const v = parsed.values[name];
      if (v !== undefined && !/^\d+$/.test(v))
        throw new Error(`--${name} must be a whole number, not ${JSON.stringify(v)}`);
    }
    if (parsed.values.scheduler && parsed.values.host)
      throw new Error('--scheduler and --host choose different simulations: give one');
    return parsed;
  } catch (err) {
    console.error(`sim: ${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
    process.exit(2);
  }
}

function parseOptions() {
  return parseArgs({
    options: {
      seed: { type: 'string' },
      seeds: { type: 'string' },
      from: { type: 'string' },
      'safety-ms': { type: 'string' },
      verbose: { type: 'boolean', default: false },
      scheduler: { type: 'boolean', default: false },
      host: { type: 'boolean', default: false },
      tail: { type: 'string' },
      'result-hold-ms': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
}

const { values } = parseCli();
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

/** What the scheduler and host simulations both return. */
interface SeededResult {
  readonly seed: number;
  readonly ok: boolean;
  readonly violation: string | undefined;
  readonly traceHash: string;
  readonly traceTail: readonly string[];
  readonly events: number;
  readonly counts: object;
}

/**
 * `--seed S` replays one seed of `run`, `--seeds N [--from S]` runs many and prints the totals
 * of their counts. `flag` is the mode's own flag in the replay command; `describe` adds what a
 * mode says about one seed.
 */
async function runSeeded<R extends SeededResult>(
  mode: string,
  flag: string,
  run: (seed: number, traceTail: number) => R | Promise<R>,
  describe: (res: R) => string = () => '',
): Promise<void> {
  const tail = Number(values.tail ?? '80');
  const show = (res: R): void => {
    console.error(`\nseed ${res.seed} FAILED: ${res.violation}`);
    console.error(`replay: npm run sim -- ${flag} --seed ${res.seed} --tail 400`);
    for (const line of res.traceTail) console.error(`  ${line}`);
  };
  if (values.seed !== undefined) {
    const res = await run(Number(values.seed), tail);
    console.log(
      `seed ${res.seed}: ${res.ok ? 'ok' : 'FAILED'}${describe(res)} events=${res.events} hash=${res.traceHash.slice(0, 16)}`,
    );
    console.log(JSON.stringify(res.counts));
    if (values.verbose) for (const line of res.traceTail) console.log(`  ${line}`);
    if (!res.ok) show(res);
    process.exitCode = res.ok ? 0 : 1;
    return;
  }
  const n = Number(values.seeds ?? '100');
  const from = Number(values.from ?? '1');
  const started = performance.now();
  const totals: Record<string, number> = {};
  const failedSeeds: number[] = [];
  for (let s = from; s < from + n; s++) {
    const res = await run(s, tail);
    for (const [k, v] of Object.entries(res.counts) as [string, number][])
      totals[k] = (totals[k] ?? 0) + v;
    if (!res.ok) {
      failedSeeds.push(s);
      show(res);
    }
  }
  const secs = (performance.now() - started) / 1000;
  console.log(
    `${mode} seeds ${from}..${from + n - 1}: ${n - failedSeeds.length} passed, ${failedSeeds.length} failed in ${secs.toFixed(1)} s`,
  );
  if (failedSeeds.length > 0) console.log(`failed: ${failedSeeds.join(' ')}`);
  console.log(`totals: ${JSON.stringify(totals)}`);
  process.exitCode = failedSeeds.length === 0 ? 0 : 1;
}

function runScheduler(): Promise<void> {
  const options = {
    ...(values['safety-ms'] ? { safetyMs: Number(values['safety-ms']) } : {}),
    ...(values['result-hold-ms'] ? { resultHoldMs: Number(values['result-hold-ms']) } : {}),
  };
  return runSeeded(
    'scheduler',
    '--scheduler',
    (seed, traceTail): SchedSimResult => runSchedulerSim({ seed, traceTail, ...options }),
    (res) => ` epoch=${res.epoch}`,
  );
}

function runHost(): Promise<void> {
  const options = values['safety-ms'] ? { safetyMs: Number(values['safety-ms']) } : {};
  return runSeeded('host', '--host', (seed, traceTail): Promise<HostSimResult> =>
    runHostSim({ seed, traceTail, ...options }),
  );
}

function runOne(seed: number): SimResult & { linearizable: string } {
  const res = runSim({
    seed,
    ...(values['safety-ms'] ? { safetyMs: Number(values['safety-ms']) } : {}),
  });
  const lin = res.ok ? checkSimHistory(res.history) : { outcome: 'skipped', detail: '' };
  const linearizable = lin.outcome;
  if (res.ok && lin.outcome === 'illegal') {
    return {
      ...res,
      ok: false,
      violation: `history not linearizable: ${lin.detail}`,
      linearizable,
    };
  }
  return { ...res, linearizable };
}

function report(res: SimResult): void {
  console.error(`\nseed ${res.seed} FAILED: ${res.violation}`);
  console.error(`replay: npm run sim -- --seed ${res.seed}`);
  console.error('trace tail:');
  for (const line of res.traceTail) console.error(`  ${line}`);
}

if (values.host) {
  await runHost();
} else if (values.scheduler) {
  await runScheduler();
} else if (values.seed !== undefined) {
  const res = runOne(Number(values.seed));
  console.log(
    `seed ${res.seed}: ${res.ok ? 'ok' : 'FAILED'} events=${res.events} hash=${res.traceHash.slice(0, 16)} linearizable=${res.linearizable}`,
  );
  console.log(JSON.stringify(res.faults));
  console.log(`scenario mix: ${JSON.stringify(res.mix)}`);
  console.log(`windows: ${JSON.stringify(res.windows)}`);
  console.log(`progress after the heal: ${JSON.stringify(res.progress)}`);
  if (values.verbose || !res.ok) for (const line of res.traceTail) console.log(`  ${line}`);
  if (!res.ok) report(res);
  process.exitCode = res.ok ? 0 : 1;
} else {
  const n = Number(values.seeds ?? '100');
  const from = Number(values.from ?? String(Date.now() % 1_000_000_000));
  const started = performance.now();
  const totals: Record<string, number> = {};
  const windows: Record<string, number> = {};
  const lin: Record<string, number> = {};
  let failed = 0;
  let seedsWithScenarios = 0;
  let slowestLeaderMs = 0;
  let slowestOutcomeMs = 0;
  for (let s = from; s < from + n; s++) {
    const res = runOne(s);
    for (const [k, v] of Object.entries(res.faults) as [string, number][]) {
      totals[k] = (totals[k] ?? 0) + v;
    }
    for (const [k, v] of Object.entries(res.windows) as [keyof WindowCounts, number][]) {
      windows[k] = (windows[k] ?? 0) + v;
    }
    if (res.mix.rate > 0 && Object.values(res.mix.weights).some((w) => w > 0)) seedsWithScenarios++;
    slowestLeaderMs = Math.max(slowestLeaderMs, res.progress.leaderMs);
    slowestOutcomeMs = Math.max(slowestOutcomeMs, res.progress.lastPendingOutcomeMs);
    lin[res.linearizable] = (lin[res.linearizable] ?? 0) + 1;
    if (!res.ok) {
      failed++;
      report(res);
    }
  }
  const secs = (performance.now() - started) / 1000;
  console.log(
    `seeds ${from}..${from + n - 1}: ${n - failed} passed, ${failed} failed in ${secs.toFixed(1)} s`,
  );
  console.log(`linearizability: ${JSON.stringify(lin)}`);
  console.log(`fault totals: ${JSON.stringify(totals)}`);
  const kinds = WINDOW_KINDS.map((k) => `${k} ${windows[`${k}Scenarios`] ?? 0}`);
  console.log(
    `window scenarios started (${seedsWithScenarios} of ${n} seeds draw some): ${kinds.join(', ')}`,
  );
  console.log(`windows reached: ${WINDOW_HITS.map((k) => `${k} ${windows[k] ?? 0}`).join(', ')}`);
  console.log(
    `progress after the heal: leader within ${slowestLeaderMs.toFixed(0)} ms, last pending op answered within ${slowestOutcomeMs.toFixed(0)} ms (slowest seed)`,
  );
  process.exitCode = failed === 0 ? 0 : 1;
}
