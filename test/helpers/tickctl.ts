/**
 * Runs `tickctl` as a user does: a real process of bin/tickctl, its exit code and output. With
 * `t`, the process is killed if the test ends first. `runBin` does the same for any bin, and
 * `runTickctlInProcess` runs the same program in this process with its output captured, for
 * tests that call it hundreds of times.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../../src/base/clock.js';
import type { CliIo } from '../../src/cli/io.js';
import { runTickctl as runTickctlProgram } from '../../src/cli/main.js';
import { TEST_ADMIN_TOKEN } from './cluster.js';
import { nodeCommand } from './node-child.js';

export const TICKCTL = fileURLToPath(new URL('../../bin/tickctl', import.meta.url));
export const TICKRAFT = fileURLToPath(new URL('../../bin/tickraft', import.meta.url));

export interface TickctlResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly t?: { teardown: (fn: () => void) => void };
}

/** A bin (TICKCTL, TICKRAFT) as a process of its own, until it exits. */
export function runBin(
  bin: string,
  args: readonly string[],
  opts: RunOptions = {},
): Promise<TickctlResult> {
  // The clusters of this test process are started with TEST_ADMIN_TOKEN; a test whose
  // environment sets TICKRAFT_TOKEN (even to '') decides the credentials itself.
  const env = { TICKRAFT_TOKEN: TEST_ADMIN_TOKEN, ...(opts.env ?? process.env) };
  const [command, argv] = nodeCommand([bin, ...args], env);
  const child = spawn(command, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  opts.t?.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

export function runTickctl(args: readonly string[], opts: RunOptions = {}): Promise<TickctlResult> {
  return runBin(TICKCTL, args, opts);
}

/** tickctl's program in this process: its exit code and what it wrote. */
export async function runTickctlInProcess(
  argv: readonly string[],
  clock: Clock = { nowMs: () => Date.now(), monotonicMs: () => performance.now() },
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    writeOut: (s) => void (out += s),
    writeErr: (s) => void (err += s),
    clock,
  };
  // As runBin: the admin token of this process's clusters, unless the test set one itself.
  const had = process.env['TICKRAFT_TOKEN'];
  process.env['TICKRAFT_TOKEN'] = had ?? TEST_ADMIN_TOKEN;
  try {
    const code = await runTickctlProgram(argv, io);
    return { code, out, err };
  } finally {
    if (had === undefined) delete process.env['TICKRAFT_TOKEN'];
  }
}
