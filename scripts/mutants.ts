/**
 * `npm run test:mutants`: the mutation check (issue 22). Each mutant of scripts/mutants/catalog.ts
 * is a planted bug; the tool applies one at a time to a scratch copy of the project and runs that
 * mutant's checks (simulator seeds, unit tests) in order until one fails. A failing check, or a
 * check that hangs past its time limit, has caught the mutant; a mutant whose checks all pass has
 * survived. The table says which check caught each mutant, on which seed or test, and how long
 * it took. Exit 0 when every mutant is caught, 1 when any survives (or a check it needs does not
 * exist yet), 2 when the tool cannot run (a mutant no longer applies, the checks fail on the
 * unmutated code, bad arguments).
 *
 * Before the mutants, every check they use runs once on an unmutated copy (the baseline): a check
 * that fails without a bug would "catch" every mutant and prove nothing.
 *
 * Too slow for `npm test` (minutes); run before a release. docs/ARCHITECTURE.md, The mutation
 * check.
 */
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { MUTANT_CLASSES, MUTANTS, type Check, type Mutant } from './mutants/catalog.js';
import { killRunningChecks, runCheck, type CheckOutcome } from './mutants/check.js';
import {
  applyMutant,
  makeScratch,
  mutatedText,
  MutantToolError,
  projectFiles,
  removeScratch,
  type Scratch,
} from './mutants/scratch.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

const USAGE = `Usage: npm run test:mutants -- [options]

Applies each planted bug of scripts/mutants/catalog.ts to a scratch copy of the project, one at
a time, and runs its checks until one fails. Prints which check caught each mutant, on which
seed or test, and how long it took. Exit 0: every mutant caught; 1: some survived (or lack a
check that does not exist yet); 2: the tool could not run.

Options:
  --only <id,...>    run only these mutants
  --list             list the mutants (and whether each still applies), run nothing
  --jobs <n>         mutants run in parallel, each in its own copy (default 1)
  --skip-baseline    do not run the checks on the unmutated code first
  --keep             keep the scratch copies and the checks' logs (their paths are printed)
  --help             this text
`;

interface Options {
  readonly only: readonly string[] | undefined;
  readonly list: boolean;
  readonly jobs: number;
  readonly baseline: boolean;
  readonly keep: boolean;
  readonly help: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        only: { type: 'string' },
        list: { type: 'boolean', default: false },
        jobs: { type: 'string', default: '1' },
        'skip-baseline': { type: 'boolean', default: false },
        keep: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (cause) {
    throw new MutantToolError('MUTANTS_USAGE', (cause as Error).message, { cause });
  }
  const jobs = Number(values.jobs);
  if (!Number.isSafeInteger(jobs) || jobs < 1)
    throw new MutantToolError(
      'MUTANTS_USAGE',
      `--jobs must be a positive integer, not ${values.jobs}`,
    );
  const only = values.only
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return {
    only,
    list: values.list,
    jobs,
    baseline: !values['skip-baseline'],
    keep: values.keep,
    help: values.help,
  };
}

// ---------------------------------------------------------------------------------------
// The catalog

function validateCatalog(mutants: readonly Mutant[]): void {
  const problems: string[] = [];
  const ids = new Set<string>();
  for (const m of mutants) {
    if (!/^[a-z0-9-]+$/.test(m.id)) problems.push(`${m.id}: an id is lowercase words and dashes`);
    if (ids.has(m.id)) problems.push(`${m.id}: id used twice`);
    ids.add(m.id);
    if (!MUTANT_CLASSES.includes(m.class)) problems.push(`${m.id}: unknown class ${m.class}`);
    if (m.find === '' || m.find === m.replace) problems.push(`${m.id}: find must be replaced`);
    if (m.checks.length === 0) problems.push(`${m.id}: no checks`);
    for (const c of m.checks)
      if (!(c.timeoutSec > 0)) problems.push(`${m.id}: check ${c.run} has no time limit`);
  }
  if (problems.length > 0)
    throw new MutantToolError('MUTANTS_CATALOG_INVALID', problems.join('\n'), {
      details: { problems },
    });
}

function select(mutants: readonly Mutant[], only: readonly string[] | undefined): Mutant[] {
  if (only === undefined) return [...mutants];
  const unknown = only.filter((id) => !mutants.some((m) => m.id === id));
  if (unknown.length > 0)
    throw new MutantToolError(
      'MUTANTS_USAGE',
      `no such mutant: ${unknown.join(', ')} (npm run test:mutants -- --list)`,
    );
  return mutants.filter((m) => only.includes(m.id));
}

/** Why each mutant that no longer applies to the project does not. */
function applicability(mutants: readonly Mutant[]): Map<string, string> {
  const broken = new Map<string, string>();
  for (const m of mutants) {
    try {
      mutatedText(ROOT, m);
    } catch (err) {
      if (!(err instanceof MutantToolError)) throw err;
      broken.set(m.id, err.message);
    }
  }
  return broken;
}

// ---------------------------------------------------------------------------------------
// Running

const label = (c: Check): string => c.label ?? c.run;

/** Scratch copies alive now, removed if the run is interrupted. */
const live = new Set<Scratch>();

function freshCopy(files: readonly string[], name: string): Scratch {
  const s = makeScratch(ROOT, files, name);
  live.add(s);
  return s;
}

function dispose(s: Scratch, keep: boolean): void {
  live.delete(s);
  if (keep) log(`  kept ${s.dir}`);
  else removeScratch(s);
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Runs `fn` over `items` with at most `jobs` at a time; results in the order of `items`. */
async function pool<T, R>(
  items: readonly T[],
  jobs: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, worker));
  return results;
}

const secs = (s: number): string => s.toFixed(1);

/** Runs each distinct check once on the unmutated code; throws if any of them fails. */
async function runBaseline(
  mutants: readonly Mutant[],
  files: readonly string[],
  opts: Options,
): Promise<void> {
  const checks = new Map<string, Check>();
  for (const m of mutants) for (const c of m.checks) checks.set(c.run, c);
  const list = [...checks.values()];
  log(`baseline: ${list.length} checks on the unmutated code`);
  const outcomes = await pool(list, opts.jobs, async (c, i) => {
    const s = freshCopy(files, 'baseline');
    try {
      const o = await runCheck(s, c, `baseline-${i + 1}`);
      log(`  ${label(c)}: ${describe(o)}`);
      return o;
    } finally {
      dispose(s, opts.keep);
    }
  });
  const bad = list.flatMap((c, i) => {
    const o = outcomes[i]!;
    // A check naming a file that does not exist yet is reported with each mutant instead.
    const failed = o.kind !== 'passed' && !(o.kind === 'cannot-run' && o.missingFile);
    return failed ? [`${label(c)}: ${describe(o)}`] : [];
  });
  if (bad.length > 0)
    throw new MutantToolError(
      'MUTANTS_BASELINE_FAILED',
      `these checks fail without any mutant, so they cannot judge one:\n  ${bad.join('\n  ')}`,
      { details: { failing: bad } },
    );
}

function describe(o: CheckOutcome): string {
  switch (o.kind) {
    case 'passed':
      return `passed in ${secs(o.seconds)} s`;
    case 'failed':
      return `FAILED in ${secs(o.seconds)} s: ${o.detail}`;
    case 'timeout':
      return `TIMEOUT after ${secs(o.seconds)} s: ${o.detail}`;
    case 'cannot-run':
      return `cannot run: ${o.reason}`;
  }
}

interface CheckError {
  readonly check: string;
  readonly reason: string;
}

type MutantResult =
  | {
      readonly status: 'caught';
      readonly by: string;
      readonly timeout: boolean;
      readonly detail: string;
      readonly seconds: number;
      /** The checks that could not run, and why. */
      readonly errors: readonly CheckError[];
    }
  | {
      readonly status: 'survived';
      readonly passed: readonly string[];
      readonly seconds: number;
      /** The checks that could not run, and why. */
      readonly errors: readonly CheckError[];
    };

async function runMutant(
  m: Mutant,
  files: readonly string[],
  opts: Options,
  position: string,
): Promise<MutantResult> {
  const s = freshCopy(files, m.id);
  let seconds = 0;
  const errors: CheckError[] = [];
  const passed: string[] = [];
  try {
    applyMutant(s, m);
    for (const [i, c] of m.checks.entries()) {
      const o = await runCheck(s, c, `${i + 1}`);
      log(`${position} ${m.id}: ${label(c)}: ${describe(o)}`);
      if (o.kind === 'cannot-run') {
        errors.push({ check: label(c), reason: o.reason });
        continue;
      }
      seconds += o.seconds;
      if (o.kind === 'passed') {
        passed.push(label(c));
        continue;
      }
      return {
        status: 'caught',
        by: label(c),
        timeout: o.kind === 'timeout',
        detail: o.detail,
        seconds,
        errors,
      };
    }
    return { status: 'survived', passed, seconds, errors };
  } finally {
    dispose(s, opts.keep);
  }
}

// ---------------------------------------------------------------------------------------
// Reporting

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]): string =>
    `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function resultRow(m: Mutant, r: MutantResult): string[] {
  if (r.status === 'caught') {
    const by = r.timeout ? `${r.by} (timeout)` : r.by;
    return [m.id, m.class, by, r.detail, secs(r.seconds)];
  }
  if (r.errors.length > 0)
    return [
      m.id,
      m.class,
      'ERROR: a check cannot run',
      `${r.errors.map((e) => e.reason).join('; ')}; the other checks passed`,
      secs(r.seconds),
    ];
  return [m.id, m.class, 'SURVIVED', `passed: ${r.passed.join(', ')}`, secs(r.seconds)];
}

function listMutants(mutants: readonly Mutant[]): void {
  const broken = applicability(mutants);
  const rows = mutants.map((m) => [
    m.id,
    m.class,
    m.file,
    broken.has(m.id) ? 'NO' : 'yes',
    m.description,
  ]);
  console.log(table(['id', 'class', 'file', 'applies', 'the bug'], rows));
  for (const m of mutants) console.log(`\n${m.id}: ${m.checks.map(label).join(' → ')}`);
  for (const why of broken.values()) console.error(`\n${why}`);
  if (broken.size > 0) process.exitCode = 2;
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts.help) {
    process.stdout.write(USAGE);
    return;
  }
  validateCatalog(MUTANTS);
  const mutants = select(MUTANTS, opts.only);
  if (opts.list) {
    listMutants(mutants);
    return;
  }
  const broken = applicability(mutants);
  if (broken.size > 0)
    throw new MutantToolError('MUTANT_DOES_NOT_APPLY', [...broken.values()].join('\n'), {
      details: { mutants: [...broken.keys()] },
    });
  const started = performance.now();
  const files = projectFiles(ROOT);
  if (opts.baseline) await runBaseline(mutants, files, opts);
  log(`${mutants.length} mutants, ${opts.jobs} at a time`);
  const results = await pool(mutants, opts.jobs, (m, i) =>
    runMutant(m, files, opts, `[${i + 1}/${mutants.length}]`),
  );
  const wall = (performance.now() - started) / 1000;
  console.log('');
  console.log(
    table(
      ['id', 'class', 'caught by', 'detail (seed/test)', 'seconds'],
      mutants.map((m, i) => resultRow(m, results[i]!)),
    ),
  );
  const caught = results.filter((r) => r.status === 'caught').length;
  const errors = mutants.flatMap((m, i) =>
    results[i]!.errors.map((e) => `${m.id}: ${e.check}: ${e.reason}`),
  );
  if (errors.length > 0) console.log(`\nchecks that could not run:\n  ${errors.join('\n  ')}`);
  console.log(
    `\n${caught} of ${mutants.length} mutants caught, ${mutants.length - caught} not; ` +
      `${secs(wall)} s wall time (${opts.jobs} at a time${opts.baseline ? ', baseline included' : ''})`,
  );
  process.exitCode = caught === mutants.length ? 0 : 1;
}

function interrupted(signal: NodeJS.Signals): void {
  killRunningChecks();
  for (const s of live) removeScratch(s);
  log(`\n${signal}: stopped; scratch copies removed`);
  process.exit(130);
}

process.on('SIGINT', interrupted);
// `npm run test:mutants -- --list | head`: a reader that stops reading is no error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  killRunningChecks();
  for (const s of live) removeScratch(s);
  process.exit(0);
});
process.on('SIGTERM', interrupted);

main().catch((err: unknown) => {
  killRunningChecks();
  for (const s of live) removeScratch(s);
  if (err instanceof MutantToolError) {
    log(`test:mutants: ${err.message}`);
    if (err.code === 'MUTANTS_USAGE') log(`\n${USAGE}`);
  } else {
    const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
    log(`test:mutants: unexpected error: ${text}`);
  }
  // Now, not when the event loop drains: other workers of the pool would start more checks.
  process.exit(2);
});
