/**
 * Runs one check of `npm run test:mutants` in a scratch copy: a command with a time limit, its
 * output kept in a log file and its failing line picked out (the simulator's `seed N FAILED: …`,
 * tap's first `not ok`, or the error a crash printed).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Check } from './catalog.js';
import type { Scratch } from './scratch.js';

export type CheckOutcome =
  /** Exit 0: the check saw nothing wrong. */
  | { readonly kind: 'passed'; readonly seconds: number }
  /** Non-zero exit: the check failed (a mutant is caught). */
  | {
      readonly kind: 'failed';
      readonly seconds: number;
      readonly exitCode: number | null;
      readonly detail: string;
    }
  /** No result in the check's time limit: a hang (a mutant is caught, by timeout). */
  | { readonly kind: 'timeout'; readonly seconds: number; readonly detail: string }
  /**
   * The check could not run: a file its command names is not in the project (yet), or the
   * command itself could not be started. It judged nothing, so it catches nothing.
   */
  | { readonly kind: 'cannot-run'; readonly reason: string; readonly missingFile: boolean };

/** Processes running now, so that an interrupted run can stop them (their process groups). */
const running = new Set<ChildProcess>();

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    // The check runs in its own process group (detached): its children (tap's test processes)
    // go with it, and nothing else does.
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // The group is already gone.
  }
}

/** Stops every check still running (on SIGINT or SIGTERM). */
export function killRunningChecks(): void {
  for (const child of running) killGroup(child);
  running.clear();
}

/** The project files a command names (arguments that look like paths to files). */
export function namedFiles(run: string): string[] {
  return run.split(' ').filter((a) => /^[\w.-]+(\/[\w.-]+)+\.[cm]?[jt]s$/.test(a));
}

/** Keeps the first `headMax` and the last `tailMax` characters of a stream of text. */
class Capture {
  private head = '';
  private tail = '';
  private dropped = false;

  constructor(
    private readonly headMax = 1 << 20,
    private readonly tailMax = 1 << 18,
  ) {}

  add(s: string): void {
    if (this.head.length < this.headMax) {
      const room = this.headMax - this.head.length;
      this.head += s.slice(0, room);
      s = s.slice(room);
    }
    if (s === '') return;
    this.tail += s;
    if (this.tail.length > this.tailMax) {
      this.tail = this.tail.slice(this.tail.length - this.tailMax);
      this.dropped = true;
    }
  }

  text(): string {
    return this.head + (this.dropped ? '\n[…]\n' : '') + this.tail;
  }
}

const DETAIL_MAX = 120;

function clip(s: string): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length <= DETAIL_MAX ? one : `${one.slice(0, DETAIL_MAX - 1)}…`;
}

/** The line that says why a check failed, as short as the table allows. */
export function failureDetail(output: string): string {
  const seed = /seed (\d+) FAILED: ([^\n]*)/.exec(output);
  if (seed) {
    const counts = /: (\d+) passed, (\d+) failed/.exec(output);
    const of = counts ? ` (${counts[2]} of ${Number(counts[1]) + Number(counts[2])} failed)` : '';
    return clip(`seed ${seed[1]}${of}: ${seed[2]}`);
  }
  const tap = tapFailure(output);
  if (tap !== undefined) return clip(tap);
  // An uncaught error: Node prints the source line first, then `SomeError: message`.
  const error =
    /^\s*\w*(?:Error|Violation)\b(?: \[\w+\])?: .*$/m.exec(output) ??
    /^.*assertion failed.*$/im.exec(output);
  if (error) return clip(error[0]);
  const lines = output.split('\n').filter((l) => l.trim() !== '');
  return clip(lines[lines.length - 1] ?? 'no output');
}

/**
 * tap's first failing assertion, as `file:line assertion, in: subtest`. tap prints a failing
 * assertion before the subtests and the file that hold it, so the first `not ok` is the most
 * precise; its YAML block says where it is, and the nearest `# Subtest:` above it, less
 * indented, is the test it belongs to.
 */
function tapFailure(output: string): string | undefined {
  const lines = output.split('\n');
  const at = lines.findIndex((l) => /^\s*not ok \d+ - /.test(l));
  if (at === -1) return undefined;
  const line = lines[at]!;
  const indent = line.length - line.trimStart().length;
  const name = line.replace(/^\s*not ok \d+ - /, '').replace(/\s+# (?:time|TODO|SKIP)\b.*$/, '');
  let where = '';
  for (let i = at + 1; i < lines.length && i < at + 40; i++) {
    const l = lines[i]!.trim();
    if (l === '...') break;
    const file = /^fileName: (.+)$/.exec(l);
    if (file) where = file[1]!.replace(/^.*\//, '');
    const n = /^lineNumber: (\d+)$/.exec(l);
    if (n && where !== '') {
      where += `:${n[1]}`;
      break;
    }
  }
  let subtest = '';
  for (let i = at - 1; i >= 0; i--) {
    const l = lines[i]!;
    const m = /^(\s*)# Subtest: (.*)$/.exec(l);
    if (m && m[1]!.length < indent) {
      subtest = m[2]!;
      break;
    }
  }
  // A top-level assertion's subtest is the file itself.
  const file = where.replace(/:\d+$/, '');
  const isFile = subtest === '' || (file !== '' && subtest.endsWith(file));
  const inTest = isFile ? '' : `, in: ${subtest}`;
  return `${where === '' ? 'not ok' : where} ${name}${inTest}`;
}

/** Runs `check` in the scratch copy; its output goes to `logs/<logName>.log`. */
export function runCheck(s: Scratch, check: Check, logName: string): Promise<CheckOutcome> {
  for (const f of namedFiles(check.run)) {
    if (!existsSync(join(s.project, f)))
      return Promise.resolve({
        kind: 'cannot-run',
        reason: `${f} does not exist`,
        missingFile: true,
      } as const);
  }
  const [cmd, ...args] = check.run.split(' ').filter((a) => a !== '');
  const log = createWriteStream(join(s.logs, `${logName}.log`));
  log.write(`$ ${check.run}\n`);
  const capture = new Capture();
  const started = performance.now();
  return new Promise<CheckOutcome>((resolve) => {
    const child = spawn(cmd!, args, {
      cwd: s.project,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
    });
    running.add(child);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
    }, check.timeoutSec * 1000);
    const take = (chunk: Buffer): void => {
      log.write(chunk);
      capture.add(chunk.toString('utf8'));
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    let done = false;
    const finish = (outcome: CheckOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      running.delete(child);
      // Anything the check left behind in its group (a test's own child) goes too.
      killGroup(child);
      log.end(`\n# ${outcome.kind}\n`, () => resolve(outcome));
    };
    child.on('error', (err) => {
      finish({ kind: 'cannot-run', reason: clip(err.message), missingFile: false });
    });
    child.on('close', (code, signal) => {
      const seconds = (performance.now() - started) / 1000;
      const output = capture.text();
      if (timedOut) {
        const last = /seed (\d+)/g;
        let seedSeen: string | undefined;
        for (let m = last.exec(output); m; m = last.exec(output)) seedSeen = m[1];
        const at = seedSeen === undefined ? '' : ` (last seed printed: ${seedSeen})`;
        finish({
          kind: 'timeout',
          seconds,
          detail: `hung: no result in ${check.timeoutSec} s${at}`,
        });
      } else if (code === 0) {
        finish({ kind: 'passed', seconds });
      } else {
        const why = code === null ? `killed by ${signal ?? 'a signal'}` : failureDetail(output);
        finish({ kind: 'failed', seconds, exitCode: code, detail: why });
      }
    });
  });
}
