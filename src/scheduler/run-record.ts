/**
 * A finished run as a few dozen bytes: how a group keeps its run history without holding an
 * object per run on the heap (run-table.ts). At thousands of fires a second every run would
 * otherwise stay an object graph (run, attempts array, attempt, strings) of over 600 bytes per
 * replica for as long as its history is kept, and the collector would walk them all.
 *
 * A record is one msgpack array. The run's fire id and job id are not in it (the table knows
 * them), and its times are kept as offsets from its slot, which are small integers. The bytes
 * are a function of the run's fields alone, so replicas holding the same runs hold the same
 * records, whatever order they packed them in.
 */
import { Packr } from 'msgpackr';
import { assertionFailed } from '../base/assert.js';
import {
  RUN_STATUSES,
  fireIdOf,
  type Attempt,
  type AttemptRecordOutcome,
  type Run,
  type RunOverrides,
  type RunStatus,
  type UpstreamOutcome,
  type UpstreamState,
} from './model.js';

const packr = new Packr({ useRecords: false, moreTypes: false });

const OUTCOMES: readonly AttemptRecordOutcome[] = ['success', 'retry', 'fail', 'accepted'];
const UPSTREAM_OUTCOMES: readonly UpstreamOutcome[] = ['succeeded', 'failed', 'missing', 'timeout'];

/** A run status as the small number records and the table keep. */
export function statusCode(status: RunStatus): number {
  const code = RUN_STATUSES.indexOf(status);
  if (code < 0) assertionFailed(`unknown run status ${status}`);
  return code;
}

export function statusOfCode(code: number): RunStatus {
  return RUN_STATUSES[code] ?? assertionFailed(`unknown run status code ${code}`);
}

const nil = <T>(v: T | undefined): T | null => (v === undefined ? null : v);

/**
 * A time as its offset from the slot: a small integer where the time itself takes 9 bytes. A
 * time whose offset would not add back to exactly it (fractional ms far from the slot) is kept
 * whole, in a one-element array.
 */
type Offset = number | [number];
function offset(ms: number, slotMs: number): Offset {
  const d = ms - slotMs;
  return slotMs + d === ms ? d : [ms];
}
function fromOffset(o: Offset, slotMs: number): number {
  return typeof o === 'number' ? slotMs + o : o[0];
}
const indexOrNil = <T>(all: readonly T[], v: T | undefined): number | null =>
  v === undefined ? null : all.indexOf(v);

/** The record of `run` (a view into msgpackr's block: copy it before the next call). */
export function packRun(run: Run): Uint8Array {
  const slot = run.slotMs;
  return packr.pack([
    statusCode(run.status),
    nil(run.reason),
    offset(run.dueAtMs, slot),
    offset(run.createdAtMs, slot),
    run.finishedAtMs === undefined ? null : offset(run.finishedAtMs, slot),
    run.manual ? 1 : 0,
    run.attempts.map((a) => [
      a.attempt,
      a.token,
      offset(a.startedAtMs, slot),
      indexOrNil(OUTCOMES, a.outcome),
      nil(a.statusCode),
      nil(a.durationMs),
      nil(a.error),
      nil(a.responseExcerpt),
      nil(a.node),
      nil(a.worker),
      nil(a.outputNode),
    ]),
    nil(run.completeByMs),
    run.upstream === undefined
      ? null
      : run.upstream.map((u) => [
          u.job,
          indexOrNil(UPSTREAM_OUTCOMES, u.outcome),
          nil(u.fireId),
          u.status === undefined ? null : statusCode(u.status),
        ]),
    nil(run.overrides),
  ]);
}

type AttemptTuple = [
  number,
  number,
  Offset,
  number | null,
  number | null,
  number | null,
  string | null,
  string | null,
  string | null,
  string | null,
  string | null,
];
type RunTuple = [
  number,
  string | null,
  Offset,
  Offset,
  Offset | null,
  0 | 1,
  AttemptTuple[],
  number | null,
  [string, number | null, string | null, number | null][] | null,
  RunOverrides | null,
];

const undef = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

/**
 * The run a record holds, as a fresh object: what the state machine built when it created the
 * run (the same fields, absent ones absent), so that it encodes as the original did.
 */
export function unpackRun(jobId: string, slotMs: number, record: Uint8Array): Run {
  const t = packr.unpack(record) as RunTuple;
  const run: Run = {
    fireId: fireIdOf(jobId, slotMs),
    jobId,
    slotMs,
    status: statusOfCode(t[0]),
    reason: undef(t[1]),
    dueAtMs: fromOffset(t[2], slotMs),
    attempts: t[6].map((a) => attemptOf(slotMs, a)),
    createdAtMs: fromOffset(t[3], slotMs),
    finishedAtMs: t[4] === null ? undefined : fromOffset(t[4], slotMs),
    manual: t[5] === 1,
  };
  if (t[9] !== null) run.overrides = t[9];
  if (t[8] !== null)
    run.upstream = t[8].map(([job, outcome, fireId, status]): UpstreamState => ({
      job,
      outcome: outcome === null ? undefined : UPSTREAM_OUTCOMES[outcome],
      fireId: undef(fireId),
      status: status === null ? undefined : statusOfCode(status),
    }));
  if (t[7] !== null) run.completeByMs = t[7];
  return run;
}

function attemptOf(slotMs: number, a: AttemptTuple): Attempt {
  const out: Attempt = {
    attempt: a[0],
    token: a[1],
    startedAtMs: fromOffset(a[2], slotMs),
    outcome: a[3] === null ? undefined : OUTCOMES[a[3]],
    statusCode: undef(a[4]),
    durationMs: undef(a[5]),
    error: undef(a[6]),
    responseExcerpt: undef(a[7]),
  };
  if (a[8] !== null) out.node = a[8];
  if (a[9] !== null) out.worker = a[9];
  if (a[10] !== null) out.outputNode = a[10];
  return out;
}
