/**
 * Clock faults through libfaketime (docs/chaos.md, Clocks), preloaded DIRECTLY into each
 * node process: never the `faketime` wrapper, which forks, so SIGKILL and SIGSTOP would hit the
 * wrapper instead of the node. Each node reads its own spec file (FAKETIME_TIMESTAMP_FILE), which
 * this module rewrites; libfaketime re-reads it at most once a second (FAKETIME_CACHE_DURATION=1).
 *
 * - FAKETIME_DONT_FAKE_MONOTONIC=1: only the wall clock moves. A faked monotonic clock stepped
 *   backwards freezes libuv's timers, which is a pause, not a clock fault.
 * - NO_FAKE_STAT=1: the storage sees real file times.
 * - Every spec carries its rate explicitly (`x1` when none): a spec without a rate keeps the
 *   previous one, so `+0` after a drift would not reset it (measured on 0.9.10).
 * - A rate applies to the time since the process started, so switching to `x r` jumps the clock
 *   by (r − 1) × uptime; drift specs subtract that jump in their offset.
 * - SIGKILL leaves the per-PID shared memory and semaphore behind; a later process with the same
 *   PID could fail with `shm_open failed: File exists`, so a killed node's objects are deleted.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const FAKETIME_LIBRARY_PATHS = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/faketime/libfaketimeMT.so.1',
];

export class FaketimeMissingError extends Error {
  override readonly name = 'FaketimeMissingError';
  readonly code = 'CHAOS_FAKETIME_MISSING';
}

/** The multi-threaded libfaketime, or a FaketimeMissingError saying how to install it. */
export function findFaketimeLibrary(): string {
  const fromEnv = process.env['TICKRAFT_FAKETIME_LIB'];
  if (fromEnv !== undefined && existsSync(fromEnv)) return fromEnv;
  for (const p of FAKETIME_LIBRARY_PATHS) if (existsSync(p)) return p;
  let multiarch = '';
  try {
    multiarch = execFileSync('gcc', ['-print-multiarch'], { encoding: 'utf8' }).trim();
  } catch {
    // No compiler: the fixed paths above were the guesses.
  }
  const guess = `/usr/lib/${multiarch}/faketime/libfaketimeMT.so.1`;
  if (multiarch !== '' && existsSync(guess)) return guess;
  throw new FaketimeMissingError(
    'the clock nemesis needs libfaketime (libfaketimeMT.so.1), which is not installed: run ' +
      '`apt-get install -y faketime` (as root), or `npm run test:deps`, or set TICKRAFT_FAKETIME_LIB',
  );
}

/** Per-node clock control. */
export class NodeClocks {
  private readonly specs = new Map<string, string>();

  constructor(
    private readonly library: string,
    private readonly dir: string,
  ) {}

  private file(node: string): string {
    return join(this.dir, `${node}.faketime`);
  }

  /** The environment that preloads libfaketime into a node; writes its spec file at `+0 x1`. */
  envFor(node: string): Record<string, string> {
    this.write(node, '+0 x1');
    return {
      LD_PRELOAD: this.library,
      FAKETIME_TIMESTAMP_FILE: this.file(node),
      FAKETIME_CACHE_DURATION: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
      NO_FAKE_STAT: '1',
      LC_ALL: 'C',
    };
  }

  spec(node: string): string {
    return this.specs.get(node) ?? '+0 x1';
  }

  private write(node: string, spec: string): void {
    writeFileSync(this.file(node), `${spec}\n`);
    this.specs.set(node, spec);
  }

  /** Moves the node's wall clock by `offsetMs` (either sign) from the true time. */
  bump(node: string, offsetMs: number): string {
    const spec = `${offsetMs >= 0 ? '+' : '-'}${(Math.abs(offsetMs) / 1000).toFixed(3)} x1`;
    this.write(node, spec);
    return spec;
  }

  /**
   * Lets the node's clock run at `rate` from now on, starting from the true time: the offset
   * cancels the jump libfaketime makes over the process's uptime.
   */
  drift(node: string, rate: number, processStartedAtMs: number, nowMs: number): string {
    const uptimeSec = Math.max(0, (nowMs - processStartedAtMs) / 1000);
    const offset = -(rate - 1) * uptimeSec;
    const spec = `${offset >= 0 ? '+' : '-'}${Math.abs(offset).toFixed(3)} x${rate.toFixed(4)}`;
    this.write(node, spec);
    return spec;
  }

  reset(node: string): void {
    this.write(node, '+0 x1');
  }

  /** Deletes the shared-memory objects libfaketime left for a SIGKILLed process. */
  static cleanupKilled(pid: number): void {
    for (const name of [`faketime_shm_${pid}`, `sem.faketime_sem_${pid}`])
      rmSync(join('/dev/shm', name), { force: true });
  }
}
