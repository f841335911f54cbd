/**
 * Time as an input. Deterministic code receives a Clock (or plain numbers read from one) as an
 * argument; SystemClock is the only implementation that reads the machine's clocks, and the
 * runtime layers are the only ones that construct it.
 */

export interface Clock {
  /** Wall-clock UTC milliseconds since the epoch. May jump when the system clock is set. */
  nowMs(): number;
  /** Monotonic milliseconds from an arbitrary origin; never goes back. */
  monotonicMs(): number;
}

export const SystemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
};
