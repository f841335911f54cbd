/**
 * Text for humans, JSON for scripts. Violations are rendered one per line (field, position,
 * reason) and, when the offending text is known, with a caret line under the characters at
 * fault, because a cron line's fourth `*` is hard to spot from an offset alone.
 */
import type { FieldViolation } from '../base/errors.js';
import { describeViolation, positionOf } from '../schedule/violations.js';

/** The text each field refers to, by field root (`schedule.dayOfMonth` → `schedule`). */
export type ViolationSources = Readonly<Record<string, string | undefined>>;

function caretLines(source: string, charIndex: number, charCount: number): string[] {
  // Tabs would shift the caret under a different column than the character it marks.
  const shown = source.replace(/\t/g, ' ');
  const width = Math.max(charCount, 1);
  return [`      ${shown}`, `      ${' '.repeat(charIndex)}${'^'.repeat(width)}`];
}

export function formatViolationsText(
  violations: readonly FieldViolation[],
  sources: ViolationSources,
): string {
  const lines: string[] = [];
  for (const violation of violations) {
    lines.push(`  ${describeViolation(violation)}`);
    const position = positionOf(violation);
    const root = violation.field.split('.')[0] ?? violation.field;
    const source = sources[root];
    if (position !== undefined && source !== undefined && position.charIndex <= source.length) {
      lines.push(...caretLines(source, position.charIndex, position.charCount));
    }
  }
  return `${lines.join('\n')}\n`;
}

export function formatViolationsJson(code: string, violations: readonly FieldViolation[]): string {
  const items = violations.map((v) => {
    const position = positionOf(v);
    return position === undefined
      ? { field: v.field, reason: v.reason }
      : { field: v.field, reason: v.reason, position };
  });
  return `${JSON.stringify({ error: { code, violations: items } })}\n`;
}
