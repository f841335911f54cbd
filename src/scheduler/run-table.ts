/**
 * A group's runs: those still to be sent or in flight as objects the state machine changes in
 * place, and finished ones packed, a few dozen bytes each in one byte array per job
 * (run-record.ts). A finished run is read back as a fresh copy, so its history costs the heap
 * and the collector next to nothing; a command that changes one opens it as an object again,
 * and the state machine packs it when the command is applied (packSettled).
 *
 * Every job with runs has a history: its runs in creation order, live and packed, which is the
 * order lists, retention and snapshots follow. Between commands the live runs are exactly the
 * runs not finished, on every replica alike, so the state, and its snapshot, does not depend on
 * when a replica packed what.
 */
import { assertionFailed } from '../base/assert.js';
import { fireIdOf, isTerminal, type Run, type RunStatus } from './model.js';
import { packRun, statusCode, statusOfCode, unpackRun } from './run-record.js';

/** `starts[i]` of a run that is an object in the live map. */
const LIVE = -1;
const DEAD_CODE = statusCode('DEAD');
const EMPTY = new Uint8Array(0);
/** A history's first byte array; it doubles as records are added. */
const FIRST_BYTES = 256;

/** One job's runs in creation order. */
class History {
  readonly slots: number[] = [];
  /** Per run: where its record starts in `bytes`, or LIVE. */
  readonly starts: number[] = [];
  /** Per packed run: its record's length. */
  readonly lengths: number[] = [];
  /** Per packed run: its status code (run-record.ts statusCode); -1 for a live one. */
  readonly statuses: number[] = [];
  /** Per packed run: when it finished; NaN for a live one. */
  readonly finishedAt: number[] = [];
  bytes: Uint8Array = EMPTY;
  /** Bytes written to `bytes`, and how many of them belong to no run any more. */
  used = 0;
  garbage = 0;
  liveCount = 0;
  /** Packed runs: DEAD ones, and the other finished ones. */
  deadCount = 0;
  doneCount = 0;
  /** At least the largest slot (a run's removal does not lower it): a new slot is found at once. */
  maxSlot = Number.NEGATIVE_INFINITY;

  indexOf(slotMs: number): number {
    if (!(slotMs <= this.maxSlot)) return -1;
    // Recent runs are asked for most.
    for (let i = this.slots.length - 1; i >= 0; i--) if (this.slots[i] === slotMs) return i;
    return -1;
  }

  record(i: number): Uint8Array {
    const start = this.starts[i]!;
    return this.bytes.subarray(start, start + this.lengths[i]!);
  }

  /** Appends a record's bytes; returns where they start. */
  write(record: Uint8Array): number {
    if (this.used + record.byteLength > this.bytes.byteLength) this.grow(record.byteLength);
    const start = this.used;
    this.bytes.set(record, start);
    this.used += record.byteLength;
    return start;
  }

  /** Makes room for `more` bytes, leaving out the records no run holds any more. */
  private grow(more: number): void {
    const needed = this.used - this.garbage + more;
    let size = Math.max(FIRST_BYTES, this.bytes.byteLength);
    while (size < needed * 1.5) size *= 2;
    const next = new Uint8Array(size);
    let at = 0;
    for (let i = 0; i < this.starts.length; i++) {
      const start = this.starts[i]!;
      if (start === LIVE) continue;
      const len = this.lengths[i]!;
      next.set(this.bytes.subarray(start, start + len), at);
      this.starts[i] = at;
      at += len;
    }
    this.bytes = next;
    this.used = at;
    this.garbage = 0;
  }

  /** Forgets the record of run `i` (it became live, or is removed). */
  dropRecord(i: number): void {
    const start = this.starts[i]!;
    if (start === LIVE) return;
    this.garbage += this.lengths[i]!;
    if (this.statuses[i] === DEAD_CODE) this.deadCount--;
    else this.doneCount--;
    this.starts[i] = LIVE;
    this.lengths[i] = 0;
    this.statuses[i] = -1;
    this.finishedAt[i] = Number.NaN;
  }

  append(slotMs: number): void {
    this.slots.push(slotMs);
    this.starts.push(LIVE);
    this.lengths.push(0);
    this.statuses.push(-1);
    this.finishedAt.push(Number.NaN);
    this.liveCount++;
    if (slotMs > this.maxSlot) this.maxSlot = slotMs;
  }

  /** Stores `run` (finished) as run `i`'s record. */
  pack(i: number, run: Run): void {
    const code = statusCode(run.status);
    this.starts[i] = this.write(packRun(run));
    this.lengths[i] = this.used - this.starts[i];
    this.statuses[i] = code;
    this.finishedAt[i] = run.finishedAtMs ?? Number.NaN;
    this.liveCount--;
    if (code === DEAD_CODE) this.deadCount++;
    else this.doneCount++;
  }

  /** Removes the runs whose index `drop` accepts, keeping the others in order. */
  removeWhere(drop: (i: number) => boolean): void {
    let w = 0;
    for (let i = 0; i < this.slots.length; i++) {
      if (drop(i)) {
        if (this.starts[i] === LIVE) this.liveCount--;
        else this.dropRecord(i);
        continue;
      }
      this.slots[w] = this.slots[i]!;
      this.starts[w] = this.starts[i]!;
      this.lengths[w] = this.lengths[i]!;
      this.statuses[w] = this.statuses[i]!;
      this.finishedAt[w] = this.finishedAt[i]!;
      w++;
    }
    this.slots.length = w;
    this.starts.length = w;
    this.lengths.length = w;
    this.statuses.length = w;
    this.finishedAt.length = w;
  }
}

/** A history as a snapshot holds it: its records in run order, whatever their layout in memory. */
export type HistoryImage = [
  jobId: string,
  slots: number[],
  statuses: number[],
  finishedAt: number[],
  lengths: number[],
  records: Uint8Array,
];

/** How many finished runs a job keeps, and for how long (SchedulerLimits). */
export interface HistoryLimits {
  readonly runsPerJobMax: number;
  readonly deadRunsPerJobMax: number;
  readonly runRetentionMs: number;
}

export class RunTable {
  private readonly live = new Map<string, Run>();
  private readonly histories = new Map<string, History>();
  /** Runs a command added, opened or finished: packSettled packs the finished ones. */
  private readonly pending = new Set<string>();
  /**
   * The runs packed since forgetRecent(), as the objects they were: what the dispatcher and the
   * run watchers read right after the command that finished them, without decoding each.
   */
  private readonly recent = new Map<string, Run>();
  private packedCount = 0;

  /** Every run, live or packed. */
  get size(): number {
    return this.live.size + this.packedCount;
  }

  /** Runs not finished (between commands: the live ones). */
  get liveSize(): number {
    return this.live.size;
  }

  has(fireId: string): boolean {
    return this.live.has(fireId) || this.locate(fireId) !== undefined;
  }

  /**
   * The run, or undefined. A finished run is a fresh copy each time: read it, do not change it
   * (the state machine changes runs through open()).
   */
  get(fireId: string): Run | undefined {
    const run = this.live.get(fireId) ?? this.recent.get(fireId);
    if (run !== undefined) return run;
    const at = this.locate(fireId);
    if (at === undefined || at.h.starts[at.i] === LIVE) return undefined;
    return unpackRun(at.jobId, at.slotMs, at.h.record(at.i));
  }

  /** The run of a job's slot, or undefined (get() without parsing a fire id). */
  find(jobId: string, slotMs: number): Run | undefined {
    const h = this.histories.get(jobId);
    if (h === undefined) return undefined;
    const i = h.indexOf(slotMs);
    if (i < 0) return undefined;
    if (h.starts[i] === LIVE) return this.live.get(fireIdOf(jobId, slotMs));
    return unpackRun(jobId, slotMs, h.record(i));
  }

  /** The run as a live object the caller may change; packSettled packs it again if finished. */
  open(fireId: string): Run | undefined {
    const run = this.live.get(fireId);
    if (run !== undefined) {
      this.pending.add(fireId);
      return run;
    }
    const at = this.locate(fireId);
    if (at === undefined || at.h.starts[at.i] === LIVE) return undefined;
    const opened = unpackRun(at.jobId, at.slotMs, at.h.record(at.i));
    this.makeLive(at.h, at.i, opened);
    return opened;
  }

  /** Adds a run whose slot its job has no run of yet, at the end of the job's history. */
  add(run: Run): void {
    let h = this.histories.get(run.jobId);
    if (h === undefined) this.histories.set(run.jobId, (h = new History()));
    if (h.indexOf(run.slotMs) >= 0) assertionFailed(`run ${run.fireId} added twice`);
    h.append(run.slotMs);
    this.live.set(run.fireId, run);
    this.pending.add(run.fireId);
  }

  /** Puts `run` in place of the run of the same slot, which keeps its place in the history. */
  replace(run: Run): void {
    const h = this.histories.get(run.jobId);
    const i = h?.indexOf(run.slotMs) ?? -1;
    if (h === undefined || i < 0) return assertionFailed(`run ${run.fireId} replaced but absent`);
    if (h.starts[i] !== LIVE) this.makeLive(h, i, run);
    else {
      this.live.set(run.fireId, run);
      this.pending.add(run.fireId);
    }
  }

  /** Run `i` of `h`, packed, becomes the live object `run` (packed again by packSettled). */
  private makeLive(h: History, i: number, run: Run): void {
    h.dropRecord(i);
    h.liveCount++;
    this.packedCount--;
    this.recent.delete(run.fireId);
    this.live.set(run.fireId, run);
    this.pending.add(run.fireId);
  }

  /** The live object `run`, finished, becomes run `i` of `h`'s record. */
  private packLive(h: History, i: number, run: Run): void {
    h.pack(i, run);
    this.live.delete(run.fireId);
    this.packedCount++;
  }

  /** A run removed from its history: out of the live map, the recent runs and the count. */
  private forget(fireId: string): void {
    this.recent.delete(fireId);
    if (!this.live.delete(fireId)) this.packedCount--;
  }

  /** A run that finished: packed at the end of the command. */
  noteSettled(fireId: string): void {
    this.pending.add(fireId);
  }

  /** Packs the finished runs the command added, opened or finished; returns their jobs. */
  packSettled(): Set<string> {
    const jobs = new Set<string>();
    for (const fireId of this.pending) {
      const run = this.live.get(fireId);
      if (run === undefined) continue;
      jobs.add(run.jobId);
      if (!isTerminal(run.status)) continue;
      const h = this.histories.get(run.jobId)!;
      const i = h.indexOf(run.slotMs);
      if (i < 0) assertionFailed(`run ${fireId} has no place in its job's history`);
      this.packLive(h, i, run);
      this.recent.set(fireId, run);
    }
    this.pending.clear();
    return jobs;
  }

  /** Lets go of the runs packed so far (their readers ran: see SchedulerStateMachine.takeTouched). */
  forgetRecent(): void {
    if (this.recent.size > 0) this.recent.clear();
  }

  /** Removes a run; returns whether there was one. */
  delete(fireId: string): boolean {
    const at = this.locate(fireId);
    if (at === undefined) return false;
    const { h, i } = at;
    h.removeWhere((k) => k === i);
    this.forget(fireId);
    if (h.slots.length === 0) this.histories.delete(at.jobId);
    return true;
  }

  /**
   * Drops the runs of a job that `drop` accepts (given each run's status and finish time; a
   * live run's own), keeping the others in order; returns the fire ids dropped.
   */
  dropWhere(
    jobId: string,
    drop: (status: RunStatus, finishedAtMs: number | undefined) => boolean,
  ): string[] {
    const h = this.histories.get(jobId);
    if (h === undefined) return [];
    const gone = new Set<number>();
    this.eachOf(jobId, h, (i, _slot, status, finishedAtMs) => {
      if (drop(status, finishedAtMs)) gone.add(i);
    });
    if (gone.size === 0) return [];
    const dropped: string[] = [];
    for (const i of gone) dropped.push(fireIdOf(jobId, h.slots[i]!));
    h.removeWhere((i) => gone.has(i));
    for (const id of dropped) this.forget(id);
    if (h.slots.length === 0) this.histories.delete(jobId);
    return dropped;
  }

  /**
   * Retention at the end of a command: the oldest finished runs past `runsPerJobMax` (DEAD
   * ones past `deadRunsPerJobMax`), and those finished `runRetentionMs` before `atMs`, go.
   * Live runs and DEAD ones younger than the DEAD bound stay. Returns the fire ids dropped.
   */
  trim(jobId: string, atMs: number, limits: HistoryLimits): string[] {
    const h = this.histories.get(jobId);
    if (h === undefined) return [];
    let excess = h.doneCount - limits.runsPerJobMax;
    let deadExcess = h.deadCount - limits.deadRunsPerJobMax;
    if (excess <= 0 && deadExcess <= 0) {
      const oldest = h.finishedAt[0]!;
      if (Number.isNaN(oldest) || oldest + limits.runRetentionMs > atMs) return [];
    }
    return this.dropWhere(jobId, (status, finishedAtMs) => {
      if (status === 'DEAD') {
        if (deadExcess <= 0) return false;
        deadExcess--;
        return true;
      }
      if (!isTerminal(status)) return false;
      const expired = finishedAtMs !== undefined && finishedAtMs + limits.runRetentionMs <= atMs;
      if (excess <= 0 && !expired) return false;
      if (excess > 0) excess--;
      return true;
    });
  }

  /**
   * Each run of a job in creation order, by slot, status and finish time, without decoding the
   * finished ones (the retention sweep reads these for every job with runs).
   */
  forEachOf(
    jobId: string,
    visit: (slotMs: number, status: RunStatus, finishedAtMs: number | undefined) => void,
  ): void {
    const h = this.histories.get(jobId);
    if (h !== undefined)
      this.eachOf(jobId, h, (_i, slot, status, finishedAtMs) => visit(slot, status, finishedAtMs));
  }

  /**
   * Each run of `h` by index, slot, status and finish time: a packed one's from the history, a
   * live one's from its object (one the table lacks, only in a table that drifted, is skipped).
   */
  private eachOf(
    jobId: string,
    h: History,
    visit: (i: number, slotMs: number, status: RunStatus, finishedAtMs: number | undefined) => void,
  ): void {
    for (let i = 0; i < h.slots.length; i++) {
      const slot = h.slots[i]!;
      if (h.starts[i] !== LIVE) {
        visit(i, slot, statusOfCode(h.statuses[i]!), h.finishedAt[i]);
        continue;
      }
      const run = this.live.get(fireIdOf(jobId, slot));
      if (run !== undefined) visit(i, slot, run.status, run.finishedAtMs);
    }
  }

  /** Whether any run of the job is not finished. */
  hasLive(jobId: string): boolean {
    return (this.histories.get(jobId)?.liveCount ?? 0) > 0;
  }

  /** The fire ids of a job's runs, in creation order. */
  idsOf(jobId: string): string[] {
    const h = this.histories.get(jobId);
    return h === undefined ? [] : h.slots.map((slot) => fireIdOf(jobId, slot));
  }

  /** A job's runs not finished (live objects: the state machine may change them). */
  liveOf(jobId: string): Run[] {
    const h = this.histories.get(jobId);
    if (h === undefined || h.liveCount === 0) return [];
    const out: Run[] = [];
    for (let i = 0; i < h.slots.length; i++)
      if (h.starts[i] === LIVE) {
        const id = fireIdOf(jobId, h.slots[i]!);
        out.push(this.live.get(id)!);
        this.pending.add(id);
      }
    return out;
  }

  /**
   * A job's runs in creation order (finished ones as copies). A live one the table lacks (only
   * a table that drifted, see audit) is left out.
   */
  runsOf(jobId: string): Run[] {
    const h = this.histories.get(jobId);
    if (h === undefined) return [];
    const out: Run[] = [];
    for (let i = 0; i < h.slots.length; i++) {
      const slot = h.slots[i]!;
      const run =
        h.starts[i] === LIVE
          ? this.live.get(fireIdOf(jobId, slot))
          : unpackRun(jobId, slot, h.record(i));
      if (run !== undefined) out.push(run);
    }
    return out;
  }

  /** The jobs with runs kept, in no promised order. */
  jobs(): IterableIterator<string> {
    return this.histories.keys();
  }

  liveIds(): IterableIterator<string> {
    return this.live.keys();
  }

  liveEntries(): IterableIterator<[string, Run]> {
    return this.live.entries();
  }

  /** Every fire id, job by job in creation order. */
  *keys(): IterableIterator<string> {
    for (const jobId of this.histories.keys()) yield* this.idsOf(jobId);
  }

  /** Every run, job by job in creation order (finished ones as copies). */
  *values(): IterableIterator<Run> {
    for (const jobId of this.histories.keys()) yield* this.runsOf(jobId);
  }

  /** Every run with its fire id, job by job in creation order (finished ones as copies). */
  *entries(): IterableIterator<[string, Run]> {
    for (const run of this.values()) yield [run.fireId, run];
  }

  [Symbol.iterator](): IterableIterator<[string, Run]> {
    return this.entries();
  }

  clear(): void {
    this.live.clear();
    this.recent.clear();
    this.histories.clear();
    this.pending.clear();
    this.packedCount = 0;
  }

  /**
   * The live runs in history order (job by job, oldest first): an order every replica holding
   * the same runs agrees on, where the order they became live depends on how each got them.
   */
  liveImage(): Run[] {
    const out: Run[] = [];
    for (const [jobId, h] of this.histories) {
      if (h.liveCount === 0) continue;
      for (let i = 0; i < h.slots.length; i++)
        if (h.starts[i] === LIVE) out.push(this.live.get(fireIdOf(jobId, h.slots[i]!))!);
    }
    return out;
  }

  /** Every history, each record copied out in run order (the same bytes on every replica). */
  historyImage(): HistoryImage[] {
    const out: HistoryImage[] = [];
    for (const [jobId, h] of this.histories) {
      const packedBytes = h.used - h.garbage;
      const records = new Uint8Array(packedBytes);
      let at = 0;
      for (let i = 0; i < h.slots.length; i++) {
        if (h.starts[i] === LIVE) continue;
        records.set(h.record(i), at);
        at += h.lengths[i]!;
      }
      if (at !== packedBytes) assertionFailed(`history of ${jobId}: ${at} of ${packedBytes} bytes`);
      out.push([
        jobId,
        h.slots,
        h.statuses,
        h.starts.map((s, i) => (s === LIVE ? 0 : h.finishedAt[i]!)),
        h.lengths,
        records,
      ]);
    }
    return out;
  }

  /**
   * Loads a snapshot's histories and live runs (after clear()). The records are copied: the
   * decoded ones are views into the snapshot's bytes, which would stay alive with them.
   * `ownJobId` gives the job id the job table holds, so that the histories share it.
   */
  load(
    images: readonly HistoryImage[],
    live: readonly Run[],
    ownJobId: (id: string) => string,
  ): void {
    for (const [jobId, slots, statuses, finishedAt, lengths, records] of images) {
      const h = new History();
      const bytes = new Uint8Array(Math.max(records.byteLength, FIRST_BYTES));
      bytes.set(records);
      h.bytes = bytes;
      h.used = records.byteLength;
      let at = 0;
      for (let i = 0; i < slots.length; i++) {
        const slot = slots[i]!;
        h.slots.push(slot);
        if (slot > h.maxSlot) h.maxSlot = slot;
        const code = statuses[i]!;
        if (code < 0) {
          h.starts.push(LIVE);
          h.lengths.push(0);
          h.statuses.push(-1);
          h.finishedAt.push(Number.NaN);
          h.liveCount++;
          continue;
        }
        h.starts.push(at);
        h.lengths.push(lengths[i]!);
        h.statuses.push(code);
        h.finishedAt.push(finishedAt[i]!);
        at += lengths[i]!;
        if (code === DEAD_CODE) h.deadCount++;
        else h.doneCount++;
        this.packedCount++;
      }
      if (at !== records.byteLength)
        assertionFailed(`history of ${jobId}: records of ${at} bytes, ${records.byteLength} held`);
      this.histories.set(ownJobId(jobId), h);
    }
    for (const run of live) this.live.set(run.fireId, run);
  }

  /**
   * Adds a run as read from an older snapshot (one object per run), in its job's history
   * order: finished runs are packed at once.
   */
  restoreRun(run: Run): void {
    this.add(run);
    this.pending.delete(run.fireId);
    if (!isTerminal(run.status)) return;
    const h = this.histories.get(run.jobId)!;
    this.packLive(h, h.slots.length - 1, run);
  }

  /**
   * Where the indexes kept beside the runs disagree with the runs themselves (empty when they
   * agree): each live run in its job's history, each packed record saying what its entry
   * says, and the counts.
   */
  audit(): string[] {
    const out: string[] = [];
    let live = 0;
    let packed = 0;
    for (const [jobId, h] of this.histories) {
      let liveCount = 0;
      let dead = 0;
      let done = 0;
      for (let i = 0; i < h.slots.length; i++) {
        const id = fireIdOf(jobId, h.slots[i]!);
        if (h.slots.indexOf(h.slots[i]!) !== i) out.push(`history of ${jobId}: ${id} twice`);
        if (h.starts[i] === LIVE) {
          liveCount++;
          const run = this.live.get(id);
          if (run === undefined) out.push(`history of ${jobId}: ${id} is live but not held`);
          else if (run.jobId !== jobId || run.fireId !== id)
            out.push(`live run ${id} holds run ${run.fireId} of ${run.jobId}`);
          continue;
        }
        packed++;
        const run = unpackRun(jobId, h.slots[i]!, h.record(i));
        if (statusCode(run.status) !== h.statuses[i])
          out.push(`history of ${jobId}: ${id} is ${run.status}, listed as ${h.statuses[i]}`);
        if (run.finishedAtMs !== h.finishedAt[i])
          out.push(
            `history of ${jobId}: ${id} finished at ${run.finishedAtMs}, listed ${h.finishedAt[i]}`,
          );
        if (!isTerminal(run.status))
          out.push(`history of ${jobId}: ${id} packed but ${run.status}`);
        if (run.status === 'DEAD') dead++;
        else done++;
      }
      live += liveCount;
      if (liveCount !== h.liveCount || dead !== h.deadCount || done !== h.doneCount)
        out.push(
          `history of ${jobId}: counts live/dead/done ${h.liveCount}/${h.deadCount}/${h.doneCount}, a scan finds ${liveCount}/${dead}/${done}`,
        );
      if (h.slots.length === 0) out.push(`history of ${jobId} is empty`);
    }
    if (live !== this.live.size)
      out.push(`live runs: ${this.live.size} held, ${live} in histories`);
    if (packed !== this.packedCount)
      out.push(`packed runs: ${this.packedCount} counted, ${packed} held`);
    for (const [id, run] of this.live)
      if (isTerminal(run.status)) out.push(`live run ${id} is ${run.status}, not packed`);
    return out;
  }

  private locate(
    fireId: string,
  ): { jobId: string; slotMs: number; h: History; i: number } | undefined {
    const colon = fireId.lastIndexOf(':');
    if (colon <= 0) return undefined;
    const jobId = fireId.slice(0, colon);
    const slotText = fireId.slice(colon + 1);
    const slotMs = Number(slotText);
    // Only the fire id fireIdOf gives: "j:007" names no run.
    if (slotText.length === 0 || String(slotMs) !== slotText) return undefined;
    const h = this.histories.get(jobId);
    if (h === undefined) return undefined;
    const i = h.indexOf(slotMs);
    return i < 0 ? undefined : { jobId, slotMs, h, i };
  }
}
