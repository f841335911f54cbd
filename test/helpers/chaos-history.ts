/**
 * Builds chaos histories by hand for the checker's tests: meta first, then operations (each on a
 * fresh process id, as a driver that retires ids would), deliveries, faults and final reads.
 * Driver time 0 is START_EPOCH_MS, so an `every 1s` job anchored there has slot k·1000 at driver
 * time k·1000.
 */
import type {
  CompletionRecord,
  DeliveryRecord,
  HistoryRecord,
  JobDefinition,
  JobRead,
  MetaRecord,
  NemesisKind,
  OpFunction,
  OpValue,
  RunRead,
  SinkAnswer,
} from '../../chaos/history/format.js';
import { HISTORY_FORMAT_VERSION } from '../../chaos/history/format.js';

export const START_EPOCH_MS = Date.UTC(2025, 5, 1);

export const META: MetaRecord = {
  type: 'meta',
  formatVersion: HISTORY_FORMAT_VERSION,
  t: 0,
  seed: 'test',
  startedAtEpochMs: START_EPOCH_MS,
  nemeses: [],
  durationMs: 20_000,
  nodeCount: 3,
  lagBoundMs: 1_000,
  recoveryAllowanceMs: 2_000,
  inFlightSlackMs: 500,
  lookAheadMs: 3_000,
  misfireThresholdMs: 5_000,
  runsRetainedMax: 100,
  sinkFencing: 'token',
};

export function everySecond(overrides: Partial<JobDefinition> = {}): JobDefinition {
  return {
    tenant: 'acme',
    name: 'w1',
    schedule: 'every 1s',
    anchorMs: START_EPOCH_MS,
    ...overrides,
  };
}

export function readOf(
  jobId: string,
  definition: JobDefinition,
  version = 1,
  paused = false,
): JobRead {
  return { jobId, version, paused, definition };
}

export interface OpSpec {
  readonly jobId?: string;
  readonly tenant?: string;
  readonly definition?: JobDefinition;
  readonly requestId?: string;
  readonly expectedVersion?: number;
  readonly value?: OpValue;
  readonly error?: { readonly code: string };
}

export class HistoryBuilder {
  private readonly list: HistoryRecord[] = [];
  /** Deliveries given no token: they get the job's next one in receipt order, as a leader would. */
  private readonly autoToken = new Set<DeliveryRecord>();
  private opId = 1;
  private process = 1;

  /** The records, with automatic tokens assigned (a fresh array each time). */
  get records(): HistoryRecord[] {
    const next = new Map<string, number>();
    const byT = this.list.map((r, i) => ({ r, i })).sort((a, b) => a.r.t - b.r.t || a.i - b.i);
    const out = [...this.list];
    for (const { r, i } of byT) {
      if (r.type !== 'delivery') continue;
      const last = next.get(r.jobId) ?? 1000;
      if (this.autoToken.has(r)) {
        out[i] = { ...r, token: last + 1 };
        next.set(r.jobId, last + 1);
      } else {
        next.set(r.jobId, Math.max(last, r.token));
      }
    }
    return out;
  }

  /** Replaces the meta record's fields. */
  setMeta(meta: Partial<MetaRecord>): this {
    this.list[0] = { ...(this.list[0] as MetaRecord), ...meta };
    return this;
  }

  constructor(meta: Partial<MetaRecord> = {}) {
    this.list.push({ ...META, ...meta });
  }

  /** An operation: invoke at t0; completion at t1 unless the outcome is left unknown. */
  op(
    f: OpFunction,
    t0: number,
    t1: number,
    outcome: 'ok' | 'fail' | 'info',
    spec: OpSpec = {},
  ): this {
    const opId = this.opId++;
    const process = this.process++;
    const ids = {
      ...(spec.jobId !== undefined && { jobId: spec.jobId }),
      ...(spec.tenant !== undefined && { tenant: spec.tenant }),
    };
    this.list.push({
      type: 'invoke',
      t: t0,
      process,
      opId,
      f,
      ...ids,
      ...(spec.definition && { definition: spec.definition }),
      ...(spec.requestId !== undefined && { requestId: spec.requestId }),
      ...(spec.expectedVersion !== undefined && { expectedVersion: spec.expectedVersion }),
    });
    const completion: CompletionRecord = {
      type: outcome,
      t: t1,
      process,
      opId,
      f,
      ...ids,
      ...(spec.value !== undefined && { value: spec.value }),
      ...(spec.error && { error: spec.error }),
    };
    this.list.push(completion);
    return this;
  }

  create(
    jobId: string,
    definition: JobDefinition,
    t0 = 0,
    t1 = 10,
    outcome: 'ok' | 'fail' | 'info' = 'ok',
  ): this {
    return this.op('create', t0, t1, outcome, {
      jobId,
      definition,
      requestId: `req-${jobId}`,
      ...(outcome === 'ok' && { value: readOf(jobId, definition) }),
      ...(outcome === 'fail' && { error: { code: 'INVALID_ARGUMENT' } }),
    });
  }

  /** A delivery; the token defaults to one higher than the job's last before it in time. */
  delivery(
    jobId: string,
    slotMs: number,
    t: number,
    options: { attempt?: number; token?: number; answer?: SinkAnswer; fireId?: string } = {},
  ): this {
    const answer = options.answer ?? '2xx';
    const d: DeliveryRecord = {
      type: 'delivery',
      t,
      fireId: options.fireId ?? `${jobId}:${slotMs}`,
      jobId,
      slotMs,
      attempt: options.attempt ?? 1,
      token: options.token ?? 0,
      answer,
      status: answer === '5xx' ? 503 : answer === 'stale' ? 409 : 200,
    };
    this.list.push(d);
    if (options.token === undefined) this.autoToken.add(d);
    return this;
  }

  /** On-time deliveries (receipt = slot + lagMs) of an every-second job for slots from..to s. */
  deliverSeconds(
    jobId: string,
    fromS: number,
    toS: number,
    lagMs = 20,
    skip: readonly number[] = [],
  ): this {
    for (let s = fromS; s <= toS; s++) {
      if (skip.includes(s)) continue;
      this.delivery(jobId, START_EPOCH_MS + s * 1000, s * 1000 + lagMs);
    }
    return this;
  }

  fault(
    faultId: string,
    kind: NemesisKind,
    startT: number,
    endT: number | undefined,
    spec?: Readonly<Record<string, unknown>>,
  ): this {
    this.list.push({
      type: 'nemesis',
      t: startT,
      phase: 'start',
      faultId,
      kind,
      targets: ['n1'],
      ...(spec !== undefined && { spec }),
    });
    if (endT !== undefined)
      this.list.push({ type: 'nemesis', t: endT, phase: 'end', faultId, kind, targets: ['n1'] });
    return this;
  }

  final(
    jobId: string,
    t: number,
    job: JobRead | null,
    runs: readonly RunRead[],
    complete = true,
  ): this {
    this.list.push({ type: 'final', t, tDone: t + 5, jobId, job, runs: { runs, complete } });
    return this;
  }

  /** SUCCEEDED run records for the slots (in seconds) delivered. */
  static succeeded(fromS: number, toS: number, skip: readonly number[] = []): RunRead[] {
    const runs: RunRead[] = [];
    for (let s = toS; s >= fromS; s--) {
      if (!skip.includes(s))
        runs.push({ slotMs: START_EPOCH_MS + s * 1000, status: 'SUCCEEDED', attempts: 1 });
    }
    return runs;
  }
}
