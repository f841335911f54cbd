/**
 * Invariant checks that crash. A failed assertion means the code or its state is wrong, never
 * that the input was bad: bad input gets a typed error instead (see errors.ts). Assertions stay
 * on in production because recovery is a restart from disk, which loses no acknowledged write.
 */

export class AssertionError extends Error {
  override readonly name = 'AssertionError';
  readonly code = 'ASSERTION_FAILED';
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}

/**
 * A failed assertion, for hot paths written as `if (!condition) assertionFailed(...)`: the same
 * check and error as assert(), but the message (often a template that formats numbers) is only
 * built when the check fails.
 */
export function assertionFailed(message: string): never {
  throw new AssertionError(message);
}

/** Ends an exhaustive `switch` over a union: the compiler proves this line unreachable. */
export function assertNever(value: never, what = 'value'): never {
  throw new AssertionError(`unexpected ${what}: ${JSON.stringify(value)}`);
}

export function unreachable(message: string): never {
  throw new AssertionError(`unreachable: ${message}`);
}
