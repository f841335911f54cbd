/**
 * Runs `tickctl` as a user does: a real process of bin/tickctl, its exit code and output. With
 * `t`, the process is killed if the test ends first.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const TICKCTL = fileURLToPath(new URL('../../bin/tickctl', import.meta.url));

export interface TickctlResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function runTickctl(
  args: readonly string[],
  opts: {
    readonly env?: NodeJS.ProcessEnv;
    readonly t?: { teardown: (fn: () => void) => void };
  } = {},
): Promise<TickctlResult> {
  const child = spawn(process.execPath, [TICKCTL, ...args], {
    env: opts.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  opts.t?.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}
