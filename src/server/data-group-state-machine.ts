/**
 * The state machine of a data group: the scheduler (jobs, runs, the DLQ) and, beside it, the
 * test-only key-value state the real-process tests and the replication benchmark write. An
 * entry's first byte says which one it is for: scheduler commands start with the codec's version
 * byte, key-value puts with their own tag (kv-state-machine.ts), a range split with 'S'.
 *
 * A split entry (docs/ARCHITECTURE.md, "Splitting a group") cuts the group's hash range at
 * `mid`: at that index every replica drops the jobs and keys whose shard hash is in
 * [mid, end) and keeps their state, exactly as it was at that index, as the initial snapshot
 * of the child group, which the host creates on this node (takeSpawns).
 */
import { assertionFailed } from '../base/assert.js';
import { CODEC_VERSION, decode, encode } from '../base/codec.js';
import type { GroupSpawn, GroupStateMachine } from '../multiraft/group-replica.js';
import { hashShardKey } from '../placement/hash.js';
import { SPLIT_TAG, type SplitEntry } from '../placement/split-state.js';
import type { Entry } from '../raft/messages.js';
import { SchedulerStateMachine } from '../scheduler/state-machine.js';
import { KvStateMachine } from './kv-state-machine.js';

export type SplitResult =
  | { readonly ok: true; readonly childId: number; readonly movedJobs: number }
  | { readonly ok: false; readonly code: 'SPLIT_INVALID'; readonly reason: string };

const decoder = new TextDecoder();

export interface OwnedRange {
  readonly start: number;
  readonly end: number;
}

export class DataGroupStateMachine implements GroupStateMachine {
  readonly kv = new KvStateMachine();
  readonly scheduler = new SchedulerStateMachine();
  /** Called after a snapshot replaced the state (derived indexes must be rebuilt). */
  onRestore: (() => void) | undefined;
  /** The hash range this group owns once a split cut it; undefined = what the meta map says. */
  private range: OwnedRange | undefined;
  /** Children split off this group, so a split entry applied twice is a no-op. */
  private children: number[] = [];
  /** Child groups to create on this node, from the splits applied since the last take. */
  private spawns: GroupSpawn[] = [];

  get ownedRange(): OwnedRange | undefined {
    return this.range;
  }

  /** The groups split off this one, in the order their split entries applied. */
  get childIds(): readonly number[] {
    return this.children;
  }

  /** Whether a split into `childId` has applied here. */
  hasChild(childId: number): boolean {
    return this.children.includes(childId);
  }

  /** Whether this group owns `jobId` (or key) by its own state: false once split away. */
  owns(key: string): boolean {
    const r = this.range;
    if (r === undefined) return true;
    const h = hashShardKey(key);
    return h >= r.start && h < r.end;
  }

  apply(entry: Entry): unknown {
    if (entry.data[0] === CODEC_VERSION) return this.scheduler.apply(entry);
    if (entry.data[0] === SPLIT_TAG) return this.applySplit(entry);
    return this.kv.apply(entry);
  }

  takeSpawns(): GroupSpawn[] {
    if (this.spawns.length === 0) return [];
    const out = this.spawns;
    this.spawns = [];
    return out;
  }

  private applySplit(entry: Entry): SplitResult {
    const c = JSON.parse(decoder.decode(entry.data.subarray(1))) as SplitEntry;
    if (this.children.includes(c.childId)) return { ok: true, childId: c.childId, movedJobs: 0 };
    const cur = this.range ?? { start: c.start, end: c.end };
    if (cur.start !== c.start || cur.end !== c.end || c.mid <= cur.start || c.mid >= cur.end)
      return {
        ok: false,
        code: 'SPLIT_INVALID',
        reason: `split at ${c.mid} of [${c.start}, ${c.end}) does not fit the group's range [${cur.start}, ${cur.end})`,
      };
    const child = new DataGroupStateMachine();
    child.restore(this.snapshot());
    child.children = [];
    child.setRange({ start: c.mid, end: c.end });
    child.dropUnowned();
    const movedJobs = child.scheduler.jobs.size;
    this.setRange({ start: c.start, end: c.mid });
    this.children.push(c.childId);
    this.dropUnowned();
    this.spawns.push({
      groupId: c.childId,
      index: entry.index,
      term: entry.term,
      data: child.snapshot(),
    });
    return { ok: true, childId: c.childId, movedJobs };
  }

  private setRange(r: OwnedRange): void {
    this.range = r;
    this.scheduler.owns = (jobId) => this.owns(jobId);
  }

  private dropUnowned(): number {
    this.kv.keepOnly((k) => this.owns(k));
    return this.scheduler.keepOnly((id) => this.owns(id));
  }

  snapshot(): Uint8Array {
    return encode({
      v: 2,
      kv: this.kv.snapshot(),
      scheduler: this.scheduler.snapshot(),
      range: this.range ?? null,
      children: this.children,
    });
  }

  restore(data: Uint8Array): void {
    const s = decode(data) as {
      v: number;
      kv: Uint8Array;
      scheduler: Uint8Array;
      range?: OwnedRange | null;
      children?: number[];
    };
    // Snapshots are written by this module only; another version is a bug or a newer build.
    if (!(s.v === 1 || s.v === 2)) assertionFailed(`unknown data group snapshot version ${s.v}`);
    this.kv.restore(s.kv);
    this.scheduler.restore(s.scheduler);
    this.children = [...(s.children ?? [])];
    if (s.range) this.setRange(s.range);
    else {
      this.range = undefined;
      this.scheduler.owns = undefined;
    }
    this.onRestore?.();
  }
}
