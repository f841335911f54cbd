/**
 * Violation kinds and the collector every check reports into: a count per kind and the first N
 * examples, each with enough identifiers (job, slot, fire id, driver time) to find it in the
 * history and in the node logs.
 */
import type { DriverMs, EpochMs } from '../history/format.js';

/** Every way a history can fail; docs/chaos-checker.md says what each proves. */
export const VIOLATION_KINDS = [
  'job-lost',
  'phantom-job',
  'slot-without-run',
  'slot-skipped-beyond-policy',
  'at-most-once-duplicate',
  'at-least-once-duplicate',
  'delivery-after-cancel',
  'delivery-after-pause',
  'job-read-not-linearizable',
  'fencing-stale-accepted',
  'slot-off-time',
] as const;

export type ViolationKind = (typeof VIOLATION_KINDS)[number];

export interface ViolationExample {
  readonly kind: ViolationKind;
  readonly jobId?: string;
  readonly slotMs?: EpochMs;
  readonly fireId?: string;
  /** Driver time of the record that shows it (a receipt, a read). */
  readonly t?: DriverMs;
  readonly message: string;
}

export interface ViolationSummary {
  readonly count: number;
  readonly examples: readonly ViolationExample[];
}

export class ViolationLog {
  private readonly counts = new Map<ViolationKind, number>();
  private readonly examples = new Map<ViolationKind, ViolationExample[]>();

  constructor(private readonly examplesMax: number) {}

  add(example: ViolationExample): void {
    this.counts.set(example.kind, (this.counts.get(example.kind) ?? 0) + 1);
    const list = this.examples.get(example.kind) ?? [];
    if (list.length < this.examplesMax) list.push(example);
    this.examples.set(example.kind, list);
  }

  count(kind: ViolationKind): number {
    return this.counts.get(kind) ?? 0;
  }

  get total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }

  /** Every kind, zero counts included, in the order of VIOLATION_KINDS. */
  summary(): Record<ViolationKind, ViolationSummary> {
    const out = {} as Record<ViolationKind, ViolationSummary>;
    for (const kind of VIOLATION_KINDS)
      out[kind] = { count: this.count(kind), examples: this.examples.get(kind) ?? [] };
    return out;
  }
}
