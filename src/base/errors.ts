/**
 * The one base class for operating errors. Callers branch on `code`, which is stable, never on
 * message text. Families add structured fields (violations, leader hints) rather than subclass
 * per code, so a new code is a new string, not a new class.
 */

export type ErrorDetails = Readonly<Record<string, unknown>>;

export class TickraftError extends Error {
  override readonly name: string = 'TickraftError';
  readonly code: string;
  readonly details: ErrorDetails;

  constructor(
    code: string,
    message: string,
    options: { cause?: unknown; details?: ErrorDetails } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details ?? {};
  }
}

export interface FieldViolation {
  readonly field: string;
  readonly reason: string;
}

/** Bad input: every violation is collected, and nothing is changed when any exists. */
export class ValidationError extends TickraftError {
  override readonly name = 'ValidationError';
  readonly violations: readonly FieldViolation[];

  constructor(code: string, violations: readonly FieldViolation[]) {
    const text = violations.map((v) => `${v.field}: ${v.reason}`).join('; ');
    super(code, text, { details: { violations } });
    this.violations = violations;
  }
}

/** A call's deadline passed while it waited (for a group, a leader, the answers of others). */
export class DeadlineError extends TickraftError {
  override readonly name = 'DeadlineError';
  constructor(what: string) {
    super('DEADLINE_EXCEEDED', `deadline exceeded ${what}`);
  }
}
