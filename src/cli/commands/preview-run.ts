/**
 * What `tickctl preview` computes: the schedule parsed and its next fire instants, with the same
 * code the cluster uses. Loaded only when preview runs (commands/preview.ts imports it on demand):
 * the time-zone library behind it costs every other tickctl command tens of milliseconds at start.
 */
import { apiFieldPath } from '../../api/status-map.js';
import type { FieldViolation } from '../../base/errors.js';
import { formatInstant } from '../../schedule/civil.js';
import { parseInstant } from '../../schedule/iso.js';
import { nextFires } from '../../schedule/next-fire.js';
import { tryParseSchedule } from '../../schedule/parse.js';
import type { ScheduleViolation } from '../../schedule/violations.js';
import { formatViolationsJson, formatViolationsText } from '../format.js';
import { EXIT_OK, EXIT_USAGE } from '../io.js';
import type { CliRun } from '../io.js';
import { PREVIEW_COUNT_MAX, type PreviewOptions } from './preview.js';

function parseInstantOption(
  field: string,
  text: string,
  violations: ScheduleViolation[],
): number | undefined {
  const result = parseInstant(text);
  if (result.ok) return result.ms;
  for (const p of result.problems) {
    violations.push({
      field,
      reason: p.reason,
      position: { charIndex: p.charIndex, charCount: p.charCount },
    });
  }
  return undefined;
}

function parseCount(text: string, violations: FieldViolation[]): number | undefined {
  const count = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (Number.isSafeInteger(count) && count >= 1 && count <= PREVIEW_COUNT_MAX) return count;
  violations.push({
    field: '--count',
    reason: `'${text}' is not a whole number from 1 to ${PREVIEW_COUNT_MAX}`,
  });
  return undefined;
}

function reportInvalid(
  run: CliRun,
  options: PreviewOptions,
  code: string,
  violations: readonly FieldViolation[],
  schedule: string,
): void {
  run.exitCode = EXIT_USAGE;
  if (options.json === true) {
    run.io.writeErr(formatViolationsJson(code, violations));
    return;
  }
  run.io.writeErr(`tickctl preview: invalid input (${code})\n`);
  run.io.writeErr(
    formatViolationsText(violations, {
      schedule,
      '--from': options.from,
      '--anchor': options.anchor,
    }),
  );
}

export function preview(run: CliRun, schedule: string, options: PreviewOptions): void {
  const violations: FieldViolation[] = [];
  const instantViolations: ScheduleViolation[] = [];
  const fromMs =
    options.from === undefined
      ? run.io.clock.nowMs()
      : parseInstantOption('--from', options.from, instantViolations);
  const anchorMs =
    options.anchor === undefined
      ? fromMs
      : parseInstantOption('--anchor', options.anchor, instantViolations);
  // An interval without --anchor is previewed as if the job were created at --from.
  const parsed = tryParseSchedule(schedule, { timezone: options.tz, anchorMs });
  let code = 'CLI_INVALID_ARGUMENT';
  if (!parsed.ok) {
    code = parsed.code;
    // A missing anchor means --from or --anchor was unreadable, and that is already listed.
    const own = parsed.violations.filter((v) => v.field !== 'anchorMs' || anchorMs !== undefined);
    // Named as PreviewSchedule names them (`schedule.day_of_month`), so the local answer and the
    // cluster's read the same; what only tickctl parses (--from, --anchor, --count) is named by
    // its flag.
    violations.push(...own.map((v) => ({ ...v, field: apiFieldPath(v.field) })));
  }
  violations.push(...instantViolations);
  const count = parseCount(options.count, violations);
  if (violations.length > 0 || !parsed.ok || fromMs === undefined || count === undefined) {
    reportInvalid(run, options, code, violations, schedule);
    return;
  }
  const fires = nextFires(parsed.schedule, fromMs, count).map(formatInstant);
  if (options.json === true) {
    run.io.writeOut(`${JSON.stringify(fires)}\n`);
  } else {
    if (fires.length > 0) run.io.writeOut(`${fires.join('\n')}\n`);
    else run.io.writeErr(`no fire time after ${formatInstant(fromMs)}\n`);
  }
  run.exitCode = EXIT_OK;
}
