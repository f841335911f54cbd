/**
 * The history, indexed once for every check: operations paired (invoke with its completion),
 * deliveries and reads grouped by job, fault windows, and the two time bases tied together.
 * Malformed histories (orphan completions, a process reused after `info`, no meta record) are
 * refused with a ValidationError naming each problem, since a check over them would mislead.
 */
import { ValidationError, type FieldViolation } from '../../src/base/errors.js';
import type {
  CompletionRecord,
  DeliveryRecord,
  DriverMs,
  EpochMs,
  FinalReadRecord,
  HistoryRecord,
  InvokeRecord,
  JobDefinition,
  JobRead,
  MetaRecord,
  NemesisKind,
  OpFunction,
  RunRead,
  RunsRead,
} from '../history/format.js';
import { JOB_FUNCTIONS } from '../history/format.js';

export type Outcome = 'ok' | 'fail' | 'info';

/** One client operation: its invocation and how it ended. */
export interface Op {
  readonly opId: number;
  readonly process: number;
  readonly f: OpFunction;
  readonly jobId: string | undefined;
  readonly tenant: string | undefined;
  readonly outcome: Outcome;
  readonly invokeT: DriverMs;
  /** The completion time; +Infinity when the outcome is unknown (`info`, or no completion). */
  readonly completeT: DriverMs;
  readonly invoke: InvokeRecord;
  readonly completion: CompletionRecord | undefined;
}

/** A fault from its start to its end (+Infinity when never healed). */
export interface Fault {
  readonly faultId: string;
  readonly kind: NemesisKind;
  readonly startT: DriverMs;
  readonly endT: DriverMs;
  readonly targets: readonly string[];
  readonly spec?: Readonly<Record<string, unknown>>;
}

/** A half-open interval of driver time [from, to). */
export interface Interval {
  readonly from: DriverMs;
  readonly to: DriverMs;
}

/** A read of a job's runs: from list-runs (ok) or the final read. */
export interface RunsReadAt {
  readonly t: DriverMs;
  readonly read: RunsRead;
}

export interface CheckTolerances {
  /** L */
  readonly lagBoundMs: number;
  /** R */
  readonly recoveryAllowanceMs: number;
  /** δ */
  readonly inFlightSlackMs: number;
  readonly lookAheadMs: number;
  readonly misfireThresholdMs: number;
  readonly runsRetainedMax: number;
  /** Slots later than (first final read − this) are not required to have a run yet. */
  readonly endGraceMs: number;
  /** How early (receipt before slot) a first attempt may be outside fault windows. */
  readonly earlyToleranceMs: number;
}

export class HistoryContext {
  readonly meta: MetaRecord;
  readonly ops: readonly Op[];
  readonly opsByJob: ReadonlyMap<string, readonly Op[]>;
  readonly bulkOps: readonly Op[];
  /** Sorted by receipt time (file order kept for equal times). */
  readonly deliveries: readonly DeliveryRecord[];
  readonly deliveriesByJob: ReadonlyMap<string, readonly DeliveryRecord[]>;
  readonly faults: readonly Fault[];
  readonly finals: ReadonlyMap<string, FinalReadRecord>;
  /** Every job id the history mentions, sorted. */
  readonly jobIds: readonly string[];
  /** Degraded windows [start − δ, end + R], merged and sorted. */
  readonly degraded: readonly Interval[];
  /** Slots at or after this driver time are not required to have a run. */
  readonly horizonT: DriverMs;
  readonly tolerances: CheckTolerances;
  private readonly memo = new Map<string, unknown>();

  constructor(records: readonly HistoryRecord[], options: Partial<CheckTolerances> = {}) {
    const problems: FieldViolation[] = [];
    const metas = records.filter((r): r is MetaRecord => r.type === 'meta');
    if (metas.length !== 1) {
      problems.push({
        field: 'meta',
        reason: `exactly one meta record is required, found ${metas.length}`,
      });
      throw new ValidationError('CHAOS_INVALID_HISTORY', problems);
    }
    const meta = metas[0]!;
    this.meta = meta;
    this.tolerances = {
      lagBoundMs: meta.lagBoundMs,
      recoveryAllowanceMs: meta.recoveryAllowanceMs,
      inFlightSlackMs: meta.inFlightSlackMs,
      lookAheadMs: meta.lookAheadMs ?? 3_000,
      misfireThresholdMs: meta.misfireThresholdMs ?? 5_000,
      runsRetainedMax: meta.runsRetainedMax ?? 100,
      endGraceMs: options.endGraceMs ?? meta.lagBoundMs + (meta.lookAheadMs ?? 3_000),
      earlyToleranceMs: options.earlyToleranceMs ?? 50,
      ...stripUndefined(options),
    };
    this.ops = pairOperations(records, problems);
    this.faults = pairFaults(records, problems);
    if (problems.length > 0) throw new ValidationError('CHAOS_INVALID_HISTORY', problems);

    const opsByJob = new Map<string, Op[]>();
    const bulkOps: Op[] = [];
    for (const op of this.ops) {
      if (op.jobId !== undefined && JOB_FUNCTIONS.has(op.f)) push(opsByJob, op.jobId, op);
      else bulkOps.push(op);
    }
    this.opsByJob = opsByJob;
    this.bulkOps = bulkOps;

    const deliveries = stableSortByT(
      records.filter((r): r is DeliveryRecord => r.type === 'delivery'),
    );
    this.deliveries = deliveries;
    const byJob = new Map<string, DeliveryRecord[]>();
    for (const d of deliveries) push(byJob, d.jobId, d);
    this.deliveriesByJob = byJob;

    const finals = new Map<string, FinalReadRecord>();
    for (const r of records) if (r.type === 'final') finals.set(r.jobId, r);
    this.finals = finals;

    this.jobIds = [...new Set([...opsByJob.keys(), ...byJob.keys(), ...finals.keys()])].sort();
    const { inFlightSlackMs: delta, recoveryAllowanceMs: allowance } = this.tolerances;
    this.degraded = mergeIntervals(
      this.faults.map((f) => ({ from: f.startT - delta, to: f.endT + allowance })),
    );
    const finalStarts = [...finals.values()].map((f) => f.t);
    const lastT = records.reduce((m, r) => Math.max(m, r.t), 0);
    this.horizonT =
      (finalStarts.length > 0 ? Math.min(...finalStarts) : lastT) - this.tolerances.endGraceMs;
  }

  /** Driver time → UTC epoch ms. */
  epochOf(t: DriverMs): EpochMs {
    return t + this.meta.startedAtEpochMs;
  }

  /** UTC epoch ms (a slot) → driver time. */
  tOf(epochMs: EpochMs): DriverMs {
    return epochMs - this.meta.startedAtEpochMs;
  }

  /** The degraded window containing `t`, if any. */
  degradedAt(t: DriverMs): Interval | undefined {
    return this.degraded.find((w) => w.from <= t && t < w.to);
  }

  /**
   * How far ahead of true time some node's clock may have run at any instant of [from, to]: the
   * largest forward offset of a clock fault overlapping it (δ either side, as a stamp taken just
   * before a reset may be answered after it). A drift's offset is bounded by the run's
   * clockOffsetMaxMs. 0 when no clock ran ahead.
   */
  clockAheadMs(from: DriverMs, to: DriverMs): number {
    return this.clockOffsetMs(from, to, 1);
  }

  /**
   * How far behind true time some node's clock may have been at any instant of [from, to], the
   * same way: a leader that far behind saw a slot still ahead while the driver's clock had
   * passed it. 0 when no clock fell behind.
   */
  clockBehindMs(from: DriverMs, to: DriverMs): number {
    return this.clockOffsetMs(from, to, -1);
  }

  /** The largest offset of the clock faults around [from, to] in `sign`'s direction. */
  private clockOffsetMs(from: DriverMs, to: DriverMs, sign: 1 | -1): number {
    const delta = this.tolerances.inFlightSlackMs;
    let most = 0;
    for (const f of this.faults) {
      if (f.startT > to + delta || f.endT < from - delta) continue;
      const offset = f.spec?.['offsetMs'];
      const rate = f.spec?.['rate'];
      if ((f.kind === 'clock-bump' || f.kind === 'clock-strobe') && typeof offset === 'number')
        most = Math.max(most, sign * offset);
      else if (f.kind === 'clock-drift' && typeof rate === 'number' && sign * (rate - 1) > 0)
        most = Math.max(most, this.meta.clockOffsetMaxMs ?? 0);
    }
    return most;
  }

  /**
   * The fire id the cluster gives a job's slot, `<tenant>/<job id>:<slot ms>` (job ids are unique
   * per tenant), for a violation that names a slot no delivery named; without a known tenant,
   * `<job id>:<slot ms>`.
   */
  fireIdOf(jobId: string, slotMs: EpochMs): string {
    const tenant = this.tenantOf(jobId);
    return tenant === undefined ? `${jobId}:${slotMs}` : `${tenant}/${jobId}:${slotMs}`;
  }

  /** The tenant of a job, from the definitions sent for it. */
  tenantOf(jobId: string): string | undefined {
    for (const op of this.opsByJob.get(jobId) ?? []) {
      const tenant = op.invoke.definition?.tenant;
      if (tenant !== undefined) return tenant;
    }
    return undefined;
  }

  /** Caches a per-job derivation: the checks ask for the same ones many times. */
  private cached<T>(key: string, compute: () => T): T {
    if (this.memo.has(key)) return this.memo.get(key) as T;
    const value = compute();
    this.memo.set(key, value);
    return value;
  }

  /**
   * The operations that act on a job: its own, and the bulk ones on its tenant (projected onto
   * it), sorted by invocation.
   */
  actionsOn(jobId: string): readonly Op[] {
    return this.cached(`actions:${jobId}`, () => this.computeActionsOn(jobId));
  }

  private computeActionsOn(jobId: string): Op[] {
    const tenant = this.tenantOf(jobId);
    const own = this.opsByJob.get(jobId) ?? [];
    const bulk = tenant === undefined ? [] : this.bulkOps.filter((op) => op.tenant === tenant);
    return [...own, ...bulk].sort((a, b) => a.invokeT - b.invokeT || a.opId - b.opId);
  }

  /** Every read of the job's runs: ok list-runs and the final read. */
  runsReadsOf(jobId: string): RunsReadAt[] {
    const reads: RunsReadAt[] = [];
    for (const op of this.opsByJob.get(jobId) ?? []) {
      if (op.f !== 'list-runs' || op.outcome !== 'ok') continue;
      const value = op.completion?.value;
      if (value && 'runs' in value) reads.push({ t: op.invokeT, read: value });
    }
    const final = this.finals.get(jobId);
    if (final) reads.push({ t: final.t, read: final.runs });
    return reads;
  }

  /** Every run record seen for a job (manual runs left out), by slot. */
  runRecordsOf(jobId: string): ReadonlyMap<EpochMs, readonly RunRead[]> {
    return this.cached(`runs:${jobId}`, () => this.computeRunRecordsOf(jobId));
  }

  private computeRunRecordsOf(jobId: string): Map<EpochMs, RunRead[]> {
    const bySlot = new Map<EpochMs, RunRead[]>();
    for (const { read } of this.runsReadsOf(jobId)) {
      for (const run of read.runs) if (run.manual !== true) push(bySlot, run.slotMs, run);
    }
    return bySlot;
  }

  /** Definitions the job may have had: the creates' and every update not known to have failed. */
  candidateDefinitions(jobId: string): readonly JobDefinition[] {
    return this.cached(`defs:${jobId}`, () => this.computeCandidateDefinitions(jobId));
  }

  private computeCandidateDefinitions(jobId: string): JobDefinition[] {
    const defs: JobDefinition[] = [];
    for (const op of this.opsByJob.get(jobId) ?? []) {
      if ((op.f !== 'create' && op.f !== 'update') || op.outcome === 'fail') continue;
      defs.push(acknowledgedDefinition(op));
    }
    return defs;
  }
}

/** The definition an ok create/update put in place: the server's answer if recorded, else the one sent. */
export function acknowledgedDefinition(op: Op): JobDefinition {
  const value = op.completion?.value;
  if (op.outcome === 'ok' && isJobRead(value)) return value.definition;
  return op.invoke.definition!;
}

export function isJobRead(value: unknown): value is JobRead {
  return typeof value === 'object' && value !== null && 'definition' in value;
}

function pairOperations(records: readonly HistoryRecord[], problems: FieldViolation[]): Op[] {
  const invokes = new Map<number, InvokeRecord>();
  const completions = new Map<number, CompletionRecord>();
  for (const r of records) {
    if (r.type === 'invoke') {
      if (invokes.has(r.opId)) problems.push({ field: `op ${r.opId}`, reason: 'invoked twice' });
      invokes.set(r.opId, r);
    } else if (r.type === 'ok' || r.type === 'fail' || r.type === 'info') {
      if (completions.has(r.opId))
        problems.push({ field: `op ${r.opId}`, reason: 'completed twice' });
      completions.set(r.opId, r);
    }
  }
  for (const [opId, c] of completions) {
    const inv = invokes.get(opId);
    if (!inv) problems.push({ field: `op ${opId}`, reason: 'completed but never invoked' });
    else if (inv.f !== c.f || inv.process !== c.process || inv.jobId !== c.jobId)
      problems.push({
        field: `op ${opId}`,
        reason: 'completion names another f, process or job than its invocation',
      });
    else if (c.t < inv.t)
      problems.push({ field: `op ${opId}`, reason: 'completed before it was invoked' });
  }
  const ops: Op[] = [];
  for (const inv of invokes.values()) {
    const c = completions.get(inv.opId);
    const outcome: Outcome = c === undefined ? 'info' : c.type;
    ops.push({
      opId: inv.opId,
      process: inv.process,
      f: inv.f,
      jobId: inv.jobId,
      tenant: inv.tenant,
      outcome,
      invokeT: inv.t,
      completeT: outcome === 'info' ? Number.POSITIVE_INFINITY : c!.t,
      invoke: inv,
      completion: c,
    });
  }
  ops.sort((a, b) => a.invokeT - b.invokeT || a.opId - b.opId);
  checkProcesses(ops, problems);
  return ops;
}

/** One operation at a time per process, and no reuse of a process after an unknown outcome. */
function checkProcesses(ops: readonly Op[], problems: FieldViolation[]): void {
  const busyUntil = new Map<number, { t: number; opId: number }>();
  for (const op of ops) {
    const prev = busyUntil.get(op.process);
    if (prev && op.invokeT < prev.t) {
      const why = Number.isFinite(prev.t)
        ? `invoked before its op ${prev.opId} completed`
        : `reused after op ${prev.opId} ended with an unknown outcome (retire the process id)`;
      problems.push({ field: `process ${op.process}`, reason: `op ${op.opId} ${why}` });
    }
    busyUntil.set(op.process, { t: op.completeT, opId: op.opId });
  }
}

function pairFaults(records: readonly HistoryRecord[], problems: FieldViolation[]): Fault[] {
  const open = new Map<string, Fault>();
  const faults: Fault[] = [];
  for (const r of stableSortByT(records.filter((x) => x.type === 'nemesis'))) {
    if (r.type !== 'nemesis') continue;
    if (r.phase === 'start') {
      if (open.has(r.faultId))
        problems.push({ field: `fault ${r.faultId}`, reason: 'started twice' });
      open.set(r.faultId, {
        faultId: r.faultId,
        kind: r.kind,
        startT: r.t,
        endT: Number.POSITIVE_INFINITY,
        targets: r.targets,
        ...(r.spec !== undefined && { spec: r.spec }),
      });
    } else {
      const started = open.get(r.faultId);
      if (!started) {
        problems.push({ field: `fault ${r.faultId}`, reason: 'ended but never started' });
        continue;
      }
      open.delete(r.faultId);
      faults.push({ ...started, endT: r.t });
    }
  }
  faults.push(...open.values());
  return faults.sort((a, b) => a.startT - b.startT);
}

export function mergeIntervals(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].sort((a, b) => a.from - b.from);
  const out: Interval[] = [];
  for (const w of sorted) {
    const last = out[out.length - 1];
    if (last && w.from <= last.to)
      out[out.length - 1] = { from: last.from, to: Math.max(last.to, w.to) };
    else out.push(w);
  }
  return out;
}

/** Whether [a.from, a.to] and [b.from, b.to] share a point. */
export function overlaps(a: Interval, b: Interval): boolean {
  return a.from <= b.to && b.from <= a.to;
}

export function stableSortByT<T extends { readonly t: number }>(items: readonly T[]): T[] {
  return items
    .map((item, i) => ({ item, i }))
    .sort((a, b) => a.item.t - b.item.t || a.i - b.i)
    .map((x) => x.item);
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
