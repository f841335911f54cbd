/**
 * What a job certainly was, over driver time, given only what the client saw.
 *
 * A write (create, update, delete, pause, resume, bulk-*) takes effect at some instant between
 * its invocation and its completion, or (outcome unknown) at any instant after its invocation, or
 * never. At time T a write W is a candidate for "the last write of field X" unless an ok write
 * W' of X was invoked after W completed and completed by T (W' then certainly came after W).
 * A field is certain at T when every candidate is complete and they all agree: only then is the
 * job's state known without assuming an order the history does not prove.
 *
 * The state changes only at invocation and completion times, so evaluating at each such boundary
 * gives segments with a constant answer. Pure.
 */
import type { DriverMs, EpochMs, JobDefinition } from '../history/format.js';
import {
  acknowledgedDefinition,
  isJobRead,
  type HistoryContext,
  type Interval,
  type Op,
} from './context.js';

type Field = 'exists' | 'paused' | 'definition';

interface Write {
  readonly op: Op;
  readonly field: Field;
  /** true/false for exists and paused; a definition key for definition. */
  readonly value: boolean | string;
  readonly definition?: JobDefinition;
  /** When the cluster stamped the definition (see definitionStampOf), if it said and it is credible. */
  readonly stampMs?: EpochMs;
}

/** One stretch of time over which what is known about the job does not change. */
export interface JobSegment extends Interval {
  /** The job certainly exists, is certainly not paused and has one certain definition. */
  readonly active: boolean;
  /** The certain definition, when there is one (whether or not the job is active). */
  readonly definition: JobDefinition | undefined;
  /**
   * The earliest instant the certain definition can have taken effect by the cluster's clock:
   * it owes no slot before. Undefined when some write of it gave no credible stamp.
   */
  readonly definitionFromMs: EpochMs | undefined;
  /** Some order consistent with the history has the job paused. */
  readonly maybePaused: boolean;
  /** Some order consistent with the history has the job deleted (after a create). */
  readonly maybeDeleted: boolean;
}

/** The fields of a definition that decide its slots. */
export function slotKey(def: JobDefinition): string {
  return JSON.stringify([
    def.schedule.trim(),
    def.timezone ?? 'UTC',
    def.anchorMs ?? null,
    def.startAtMs ?? null,
    def.endAtMs ?? null,
    def.remainingFires ?? null,
  ]);
}

/**
 * The stamp an ok create or update answered: the leader's clock when it proposed the write, the
 * instant from which the definition owes slots. A stamp later than the answer is possible only
 * when a leader's clock ran ahead; it is believed only within the forward offset of the clock
 * faults around the write, so a wrong stamp can never excuse more than the skew the run injected.
 */
function definitionStampOf(ctx: HistoryContext, op: Op): EpochMs | undefined {
  const value = op.completion?.value;
  if (op.outcome !== 'ok' || !isJobRead(value) || value.updatedAtMs === undefined) return undefined;
  const latest = ctx.epochOf(op.completeT) + ctx.clockAheadMs(op.invokeT, op.completeT);
  return value.updatedAtMs <= latest ? value.updatedAtMs : undefined;
}

function writesOf(ctx: HistoryContext, jobId: string): Write[] {
  const writes: Write[] = [];
  for (const op of ctx.actionsOn(jobId)) {
    if (op.outcome === 'fail') continue;
    switch (op.f) {
      case 'create':
        writes.push({ op, field: 'exists', value: true });
        writes.push({ op, field: 'paused', value: false });
        writes.push(definitionWrite(ctx, op));
        break;
      case 'update':
        writes.push(definitionWrite(ctx, op));
        break;
      case 'delete':
      case 'bulk-cancel':
        writes.push({ op, field: 'exists', value: false });
        break;
      case 'pause':
      case 'bulk-pause':
        writes.push({ op, field: 'paused', value: true });
        break;
      case 'resume':
      case 'bulk-resume':
        writes.push({ op, field: 'paused', value: false });
        break;
      case 'get':
      case 'list-runs':
        break;
    }
  }
  return writes;
}

function definitionWrite(ctx: HistoryContext, op: Op): Write {
  const definition = acknowledgedDefinition(op);
  const stampMs = definitionStampOf(ctx, op);
  return {
    op,
    field: 'definition',
    value: slotKey(definition),
    definition,
    ...(stampMs !== undefined && { stampMs }),
  };
}

/** The candidates for the last write of one field at time t (see the module comment). */
function candidatesAt(writes: readonly Write[], t: DriverMs): Write[] {
  const invoked = writes.filter((w) => w.op.invokeT <= t);
  return invoked.filter(
    (w) =>
      !invoked.some(
        (later) =>
          later.op.outcome === 'ok' && later.op.invokeT > w.op.completeT && later.op.completeT <= t,
      ),
  );
}

interface FieldState {
  /** The value when certain. */
  readonly certain: boolean | string | undefined;
  readonly possible: ReadonlySet<boolean | string>;
  readonly definition: JobDefinition | undefined;
  /** The earliest stamp of the candidates, if every one has one. */
  readonly stampMs: EpochMs | undefined;
}

function fieldAt(writes: readonly Write[], t: DriverMs): FieldState {
  const candidates = candidatesAt(writes, t);
  const possible = new Set(candidates.map((w) => w.value));
  // A write still pending at t may not have happened yet: the value before it stays possible,
  // and it is in the set already, because the pending write cannot have superseded it.
  const allDone = candidates.every((w) => w.op.completeT <= t);
  const only = possible.size === 1 ? candidates[0]! : undefined;
  return {
    certain: only && allDone && candidates.length > 0 ? only.value : undefined,
    possible,
    definition: only && allDone ? only.definition : undefined,
    stampMs:
      candidates.length > 0 && candidates.every((w) => w.stampMs !== undefined)
        ? Math.min(...candidates.map((w) => w.stampMs!))
        : undefined,
  };
}

/** The job's segments from time 0 to +Infinity, in order. */
export function jobSegments(ctx: HistoryContext, jobId: string): JobSegment[] {
  const writes = writesOf(ctx, jobId);
  const byField = (f: Field): Write[] => writes.filter((w) => w.field === f);
  const exists = byField('exists');
  const paused = byField('paused');
  const definitions = byField('definition');
  const bounds = new Set<number>([0]);
  for (const w of writes) {
    bounds.add(w.op.invokeT);
    if (Number.isFinite(w.op.completeT)) bounds.add(w.op.completeT);
  }
  const sorted = [...bounds].sort((a, b) => a - b);
  return sorted.map((from, i) => {
    const e = fieldAt(exists, from);
    const p = fieldAt(paused, from);
    const d = fieldAt(definitions, from);
    return {
      from,
      to: sorted[i + 1] ?? Number.POSITIVE_INFINITY,
      active: e.certain === true && p.certain === false && d.definition !== undefined,
      definition: d.definition,
      definitionFromMs: d.definition !== undefined ? d.stampMs : undefined,
      maybePaused: p.possible.has(true),
      maybeDeleted: e.possible.has(false),
    };
  });
}
