/**
 * History records ↔ JSON lines, pure. Reading is strict about shape (a history is evidence, and a
 * record the checker misreads would give a wrong verdict) but tolerant of the one damage an
 * append-only writer can suffer: a torn last line when its process died mid-write. That line is
 * dropped and reported; any other unreadable line is an error naming its line number.
 */
import { RUN_STATUSES } from '../../src/scheduler/model.js';
import { RUN_VIEW_STATUSES } from '../../src/scheduler/run-view.js';
import { ValidationError, type FieldViolation } from '../../src/base/errors.js';
import {
  BULK_FUNCTIONS,
  HISTORY_FORMAT_VERSION,
  JOB_FUNCTIONS,
  NEMESIS_KINDS,
  type HistoryRecord,
  type OpFunction,
} from './format.js';

/** One record as one line, newline included. */
export function encodeRecord(record: HistoryRecord): string {
  return `${JSON.stringify(record)}\n`;
}

export interface ParsedHistory {
  readonly records: HistoryRecord[];
  /** The unparseable text of a last line with no newline, dropped; undefined when none. */
  readonly tornTail: string | undefined;
}

const OP_FUNCTIONS: ReadonlySet<string> = new Set([...JOB_FUNCTIONS, ...BULK_FUNCTIONS]);
const ANSWERS: ReadonlySet<string> = new Set(['2xx', '5xx', 'slow', 'stale']);
const NEMESIS_KIND_SET: ReadonlySet<string> = new Set(NEMESIS_KINDS);
// What the API shows (run-view.ts), and the replicated statuses older histories recorded.
const RUN_STATUS_SET: ReadonlySet<string> = new Set([...RUN_VIEW_STATUSES, ...RUN_STATUSES]);

/**
 * Parses the text of one history file. `source` prefixes field names in errors (a file name).
 * @throws ValidationError CHAOS_INVALID_HISTORY naming `source:line` and the field.
 */
export function parseHistoryText(text: string, source = 'history'): ParsedHistory {
  const lines = text.split('\n');
  const records: HistoryRecord[] = [];
  const violations: FieldViolation[] = [];
  let tornTail: string | undefined;
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const isLast = i === lines.length - 1;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      // The last line has no newline after it only when its writer stopped mid-record.
      if (isLast) tornTail = line;
      else violations.push({ field: `${source}:${i + 1}`, reason: 'is not valid JSON' });
      return;
    }
    const problems = recordProblems(value);
    if (problems.length === 0) records.push(value as HistoryRecord);
    else
      for (const p of problems)
        violations.push({ field: `${source}:${i + 1}${p.field}`, reason: p.reason });
  });
  if (violations.length > 0) throw new ValidationError('CHAOS_INVALID_HISTORY', violations);
  return { records, tornTail };
}

type Obj = Readonly<Record<string, unknown>>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Collects what is wrong with one decoded line; field names start with '.'. */
export function recordProblems(value: unknown): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (!isObj(value)) return [{ field: '', reason: 'must be a JSON object' }];
  const c = new FieldCheck(value, '', out);
  c.num('t');
  switch (value['type']) {
    case 'meta':
      checkMeta(c, value);
      break;
    case 'invoke':
    case 'ok':
    case 'fail':
    case 'info':
      checkOp(c, value);
      break;
    case 'delivery':
      c.str('fireId');
      c.str('jobId');
      c.int('slotMs');
      c.int('attempt');
      c.int('token');
      c.oneOf('answer', ANSWERS);
      c.int('status');
      c.num('heldMs', true);
      break;
    case 'nemesis':
      c.oneOf('phase', new Set(['start', 'end']));
      c.str('faultId');
      c.oneOf('kind', NEMESIS_KIND_SET);
      if (!Array.isArray(value['targets']))
        out.push({ field: '.targets', reason: 'must be an array' });
      break;
    case 'final':
      c.num('tDone');
      c.str('jobId');
      if (value['job'] !== null) checkJobRead(value['job'], '.job', out);
      checkRunsRead(value['runs'], '.runs', out);
      break;
    default:
      out.push({
        field: '.type',
        reason: 'must be one of meta, invoke, ok, fail, info, delivery, nemesis, final',
      });
  }
  return out;
}

function checkMeta(c: FieldCheck, value: Obj): void {
  c.int('formatVersion');
  if (value['formatVersion'] !== HISTORY_FORMAT_VERSION) {
    c.out.push({
      field: '.formatVersion',
      reason: `this checker reads format ${HISTORY_FORMAT_VERSION}, not ${String(value['formatVersion'])}`,
    });
  }
  c.str('seed');
  c.int('startedAtEpochMs');
  c.num('durationMs');
  c.int('nodeCount');
  c.num('lagBoundMs');
  c.num('recoveryAllowanceMs');
  c.num('inFlightSlackMs');
  c.num('lookAheadMs', true);
  c.num('misfireThresholdMs', true);
  c.int('runsRetainedMax', true);
  c.oneOf('sinkFencing', new Set(['token', 'term']));
  if (!Array.isArray(value['nemeses']))
    c.out.push({ field: '.nemeses', reason: 'must be an array' });
}

function checkOp(c: FieldCheck, value: Obj): void {
  c.int('process');
  c.int('opId');
  c.oneOf('f', OP_FUNCTIONS);
  const f = value['f'] as OpFunction;
  if (JOB_FUNCTIONS.has(f)) c.str('jobId');
  if (BULK_FUNCTIONS.has(f)) c.str('tenant');
  if (value['type'] === 'invoke') {
    if (f === 'create' || f === 'update')
      checkDefinition(value['definition'], '.definition', c.out);
    c.int('expectedVersion', true);
    c.str('requestId', true);
    return;
  }
  if (value['type'] !== 'ok' || value['value'] === undefined || value['value'] === null) return;
  if (f === 'list-runs') checkRunsRead(value['value'], '.value', c.out);
  else if (f === 'create' || f === 'update' || f === 'pause' || f === 'resume' || f === 'get')
    checkJobRead(value['value'], '.value', c.out);
}

function checkDefinition(value: unknown, at: string, out: FieldViolation[]): void {
  if (!isObj(value)) {
    out.push({ field: at, reason: 'must be a job definition object' });
    return;
  }
  const c = new FieldCheck(value, at, out);
  c.str('tenant');
  c.str('schedule');
  c.str('timezone', true);
  c.int('anchorMs', true);
  c.oneOf('delivery', new Set(['at_least_once', 'at_most_once']), true);
  c.int('startAtMs', true);
  c.int('endAtMs', true);
  c.int('remainingFires', true);
  const misfire = value['misfire'];
  if (misfire !== undefined) {
    if (isObj(misfire))
      new FieldCheck(misfire, `${at}.misfire`, out).oneOf(
        'policy',
        new Set(['fire_all', 'fire_once', 'skip']),
      );
    else out.push({ field: `${at}.misfire`, reason: 'must be an object' });
  }
  const overlap = value['overlap'];
  if (overlap !== undefined) {
    if (isObj(overlap))
      new FieldCheck(overlap, `${at}.overlap`, out).oneOf(
        'policy',
        new Set(['allow', 'skip', 'buffer_one', 'buffer_all']),
      );
    else out.push({ field: `${at}.overlap`, reason: 'must be an object' });
  }
}

function checkJobRead(value: unknown, at: string, out: FieldViolation[]): void {
  if (!isObj(value)) {
    out.push({ field: at, reason: 'must be a job object' });
    return;
  }
  const c = new FieldCheck(value, at, out);
  c.str('jobId');
  c.int('version');
  if (typeof value['paused'] !== 'boolean')
    out.push({ field: `${at}.paused`, reason: 'must be a boolean' });
  c.int('nextFireAtMs', true);
  checkDefinition(value['definition'], `${at}.definition`, out);
}

function checkRunsRead(value: unknown, at: string, out: FieldViolation[]): void {
  if (!isObj(value) || !Array.isArray(value['runs'])) {
    out.push({ field: at, reason: 'must be an object with a runs array' });
    return;
  }
  if (typeof value['complete'] !== 'boolean')
    out.push({ field: `${at}.complete`, reason: 'must be a boolean' });
  (value['runs'] as unknown[]).forEach((run, i) => {
    if (!isObj(run)) {
      out.push({ field: `${at}.runs[${i}]`, reason: 'must be an object' });
      return;
    }
    const c = new FieldCheck(run, `${at}.runs[${i}]`, out);
    c.int('slotMs');
    c.oneOf('status', RUN_STATUS_SET);
    c.str('reason', true);
  });
}

/** Small typed field checks over one object, collecting problems. */
class FieldCheck {
  constructor(
    private readonly value: Obj,
    private readonly at: string,
    readonly out: FieldViolation[],
  ) {}

  private present(key: string, optional: boolean): boolean {
    if (this.value[key] !== undefined) return true;
    if (!optional) this.out.push({ field: `${this.at}.${key}`, reason: 'is required' });
    return false;
  }

  num(key: string, optional = false): void {
    if (!this.present(key, optional)) return;
    const v = this.value[key];
    if (!(typeof v === 'number' && Number.isFinite(v)))
      this.out.push({ field: `${this.at}.${key}`, reason: 'must be a finite number' });
  }

  int(key: string, optional = false): void {
    if (!this.present(key, optional)) return;
    if (!Number.isSafeInteger(this.value[key]))
      this.out.push({ field: `${this.at}.${key}`, reason: 'must be an integer' });
  }

  str(key: string, optional = false): void {
    if (!this.present(key, optional)) return;
    const v = this.value[key];
    if (!(typeof v === 'string' && v !== ''))
      this.out.push({ field: `${this.at}.${key}`, reason: 'must be a non-empty string' });
  }

  oneOf(key: string, allowed: ReadonlySet<string>, optional = false): void {
    if (!this.present(key, optional)) return;
    const v = this.value[key];
    if (!(typeof v === 'string' && allowed.has(v)))
      this.out.push({
        field: `${this.at}.${key}`,
        reason: `must be one of ${[...allowed].join(', ')}`,
      });
  }
}
