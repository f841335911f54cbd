/**
 * What a tickctl command may touch, passed in rather than reached for: output streams and the
 * clock. The real process wires them to process.stdout/stderr and the system clock; a test can
 * capture them.
 */
import type { Clock } from '../base/clock.js';

export interface CliIo {
  readonly writeOut: (text: string) => void;
  readonly writeErr: (text: string) => void;
  readonly clock: Clock;
}

/** Exit codes shared by every command. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
/** Bad usage or invalid input: nothing was done. */
export const EXIT_USAGE = 2;

/** Per-invocation state a command action reports back through. */
export interface CliRun {
  readonly io: CliIo;
  exitCode: number;
}
