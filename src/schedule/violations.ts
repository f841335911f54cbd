/**
 * Field violations of schedule input, with where in the text they are. `ValidationError` (base)
 * carries `{ field, reason }`; a schedule violation adds the position so that a CLI or an API
 * error can point at the offending characters of a long cron line.
 */
import type { FieldViolation } from '../base/errors.js';

export type ScheduleErrorCode =
  | 'SCHEDULE_INVALID_CRON'
  | 'SCHEDULE_INVALID_INTERVAL'
  | 'SCHEDULE_INVALID_AT'
  | 'SCHEDULE_INVALID_TIMEZONE';

/** Where a violation sits: characters `[charIndex, charIndex + charCount)`, 0-based. */
export interface ViolationPosition {
  /** 0-based index of the whitespace-separated token (a cron field, or `every`/`at` and its value). */
  readonly tokenIndex?: number;
  readonly charIndex: number;
  readonly charCount: number;
}

export interface ScheduleViolation extends FieldViolation {
  readonly position?: ViolationPosition;
}

/** The position of a violation, when it has one (any FieldViolation may be passed). */
export function positionOf(violation: FieldViolation): ViolationPosition | undefined {
  return (violation as ScheduleViolation).position;
}

/** Stable one-line text: `field (token 2, char 4): reason`. */
export function describeViolation(violation: FieldViolation): string {
  const position = positionOf(violation);
  if (position === undefined) return `${violation.field}: ${violation.reason}`;
  const token = position.tokenIndex === undefined ? '' : `token ${position.tokenIndex}, `;
  return `${violation.field} (${token}char ${position.charIndex}): ${violation.reason}`;
}
