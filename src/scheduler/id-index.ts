/**
 * Job id → row of the job table, iterated in insertion order.
 *
 * A `Map<string, number>` did this job, and on a busy node its lookups were the largest single
 * cost of applying a bulk registration: a miss walks a bucket chain whose every entry points to a
 * key string elsewhere in the heap, each a cache miss (about 0.8 µs per insert in a microbenchmark
 * that evicts the caches between batches, against 0.3 µs here). This table keeps each slot's
 * hash beside its row in typed arrays (open addressing, linear probing), so a probe compares
 * numbers and reads a key string only when the hashes are equal.
 *
 * The order of iteration is that of insertion (a list linked through the rows), as with a Map:
 * snapshots and scans follow it, and it must not depend on which rows a replica reused, since a
 * replica restored from a snapshot numbers its rows differently from one that applied the log.
 *
 * The hash (FNV-1a, then a finalizer) is not keyed, so ids could be crafted to collide. A probe
 * longer than PROBE_MAX turns the table into a plain Map for good (V8 seeds its string hashes per
 * process): the worst case is the Map's.
 */
import { assertionFailed } from '../base/assert.js';
import { generalArray } from '../base/general-array.js';

const EMPTY = 0;
/**
 * A probe this long means crafted or clustered hashes: fall back to a Map. At the load below,
 * linear probing over random hashes makes a cluster this long with odds of about e^-28.
 */
const PROBE_MAX = 256;
const LOAD_MAX = 0.6;
const CAPACITY_MIN = 16;

/** The 32-bit hash of an id (exported for the test that crafts collisions). */
export function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  // FNV's low bits mix poorly for short keys that differ at the end; the table masks them.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h | 0;
}

export class IdIndex {
  /** Slot → row + 1 (EMPTY when free); the slot's hash beside it. */
  private slotRows = new Int32Array(CAPACITY_MIN);
  private slotHashes = new Int32Array(CAPACITY_MIN);
  private mask = CAPACITY_MIN - 1;
  /** Set once probes grew too long: id → row from then on. */
  private fallback: Map<string, number> | undefined;
  private count = 0;
  /** By row: the id (or undefined), and the insertion-order links (-1: none). */
  private ids = generalArray<string | undefined>();
  private nextRow = new Int32Array(CAPACITY_MIN);
  private prevRow = new Int32Array(CAPACITY_MIN);
  private head = -1;
  private tail = -1;
  /** What probeAbsent() found for addProbed(): the id, its hash, its free slot (-1: too far). */
  private probedId: string | undefined;
  private probedHash = 0;
  private probedSlot = -1;

  get size(): number {
    return this.count;
  }

  /** The row of `id`, or -1. */
  get(id: string): number {
    if (this.fallback !== undefined) return this.fallback.get(id) ?? -1;
    const h = hashOf(id);
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const r = this.slotRows[i]!;
      if (r === EMPTY) return -1;
      if (this.slotHashes[i] === h && this.ids[r - 1] === id) return r - 1;
    }
  }

  has(id: string): boolean {
    return this.get(id) !== -1;
  }

  /** The id held at `row` (the index's own copy), undefined for a free row. */
  idAt(row: number): string | undefined {
    return this.ids[row];
  }

  /** Adds `id` at `row`, last in order; the caller knows `id` is absent and `row` unused. */
  add(id: string, row: number): void {
    if (this.admit(id, row)) return;
    this.growFor(this.count);
    if (!this.place(hashOf(id), row)) this.fallBack();
  }

  /**
   * Whether `id` is absent. When it is, the free slot its probe ended on is kept for addProbed(),
   * which must come next (an add or a delete in between voids it): a create costs one hash and
   * one probe, where get() then add() cost two of each.
   */
  probeAbsent(id: string): boolean {
    this.probedId = undefined;
    if (this.fallback === undefined) this.growFor(this.count + 1);
    if (this.fallback !== undefined) {
      if (this.fallback.has(id)) return false;
      this.probedId = id;
      return true;
    }
    const h = hashOf(id);
    const mask = this.mask;
    let i = h & mask;
    let n = 0;
    for (; ; i = (i + 1) & mask, n++) {
      const r = this.slotRows[i]!;
      if (r === EMPTY) break;
      if (this.slotHashes[i] === h && this.ids[r - 1] === id) return false;
    }
    this.probedId = id;
    this.probedHash = h;
    this.probedSlot = n > PROBE_MAX ? -1 : i;
    return true;
  }

  /** Adds `id` at `row`, last in order, where probeAbsent(id), just before, found room. */
  addProbed(id: string, row: number): void {
    if (this.probedId !== id) assertionFailed(`addProbed(${id}) without its probeAbsent()`);
    if (this.admit(id, row)) return;
    if (this.probedSlot === -1) {
      this.fallBack();
      return;
    }
    this.slotRows[this.probedSlot] = row + 1;
    this.slotHashes[this.probedSlot] = this.probedHash;
  }

  /** Doubles the slots when `count` ids would load them past LOAD_MAX. */
  private growFor(count: number): void {
    if (count > (this.mask + 1) * LOAD_MAX) this.resize((this.mask + 1) * 2);
  }

  /** Links and counts a new id; true when the fallback Map took it too (nothing left to do). */
  private admit(id: string, row: number): boolean {
    this.probedId = undefined;
    this.linkLast(id, row);
    this.count++;
    if (this.fallback === undefined) return false;
    this.fallback.set(id, row);
    return true;
  }

  /**
   * Makes room for `n` ids in all and rows below `rows`, so that adding them rehashes and grows
   * nothing (a snapshot's load adds millions at once).
   */
  reserve(n: number, rows: number): void {
    if (this.fallback === undefined) {
      let capacity = this.mask + 1;
      while (n > capacity * LOAD_MAX) capacity *= 2;
      if (capacity !== this.mask + 1) this.resize(capacity);
    }
    if (rows > this.nextRow.length) {
      const next = new Int32Array(rows);
      const prev = new Int32Array(rows);
      next.set(this.nextRow);
      prev.set(this.prevRow);
      this.nextRow = next;
      this.prevRow = prev;
    }
  }

  /** Removes `id`; its row, or -1 when it was not here. */
  delete(id: string): number {
    this.probedId = undefined;
    let row: number;
    if (this.fallback !== undefined) {
      row = this.fallback.get(id) ?? -1;
      if (row === -1) return -1;
      this.fallback.delete(id);
    } else {
      row = this.removeSlot(id);
      if (row === -1) return -1;
    }
    this.unlink(row);
    this.count--;
    return row;
  }

  clear(): void {
    this.slotRows = new Int32Array(CAPACITY_MIN);
    this.slotHashes = new Int32Array(CAPACITY_MIN);
    this.mask = CAPACITY_MIN - 1;
    this.fallback = undefined;
    this.count = 0;
    this.ids = generalArray<string | undefined>();
    this.nextRow = new Int32Array(CAPACITY_MIN);
    this.prevRow = new Int32Array(CAPACITY_MIN);
    this.head = -1;
    this.tail = -1;
    this.probedId = undefined;
  }

  /** Calls `f` for every id and its row, in insertion order (`f` must not change the index). */
  forEach(f: (id: string, row: number) => void): void {
    for (let r = this.head; r !== -1; r = this.nextRow[r]!) f(this.ids[r]!, r);
  }

  /** Ids and rows in insertion order (the index must not change meanwhile). */
  *entries(): Generator<[string, number], void, undefined> {
    for (let r = this.head; r !== -1; r = this.nextRow[r]!) yield [this.ids[r]!, r];
  }

  /** Ids in insertion order (the index must not change meanwhile). */
  *keys(): Generator<string, void, undefined> {
    for (let r = this.head; r !== -1; r = this.nextRow[r]!) yield this.ids[r]!;
  }

  /**
   * Where the lookup structure disagrees with the rows it indexes (empty when they agree): each
   * id found again by hashing, as many ids as the count says. The simulator's agreement check.
   */
  audit(): string[] {
    const out: string[] = [];
    let n = 0;
    const seenRows = new Set<number>();
    this.forEach((id, row) => {
      n++;
      if (seenRows.has(row)) out.push(`id index: row ${row} listed twice`);
      seenRows.add(row);
      const found = this.get(id);
      if (found !== row) out.push(`id index: ${id} is at row ${row} but a lookup finds ${found}`);
    });
    if (n !== this.count) out.push(`id index: counts ${this.count} ids but links ${n}`);
    return out;
  }

  /** Whether lookups go through the fallback Map (for tests and metrics). */
  get isFallback(): boolean {
    return this.fallback !== undefined;
  }

  /** Puts a row in the first free slot of its probe; false when the probe ran too long. */
  private place(h: number, row: number): boolean {
    const mask = this.mask;
    let i = h & mask;
    for (let n = 0; this.slotRows[i] !== EMPTY; n++) {
      if (n === PROBE_MAX) return false;
      i = (i + 1) & mask;
    }
    this.slotRows[i] = row + 1;
    this.slotHashes[i] = h;
    return true;
  }

  private resize(capacity: number): void {
    const rows = this.slotRows;
    const hashes = this.slotHashes;
    this.slotRows = new Int32Array(capacity);
    this.slotHashes = new Int32Array(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]!;
      if (r !== EMPTY && !this.place(hashes[i]!, r - 1)) {
        this.fallBack();
        return;
      }
    }
  }

  private fallBack(): void {
    const map = new Map<string, number>();
    this.forEach((id, row) => map.set(id, row));
    this.fallback = map;
    this.slotRows = new Int32Array(0);
    this.slotHashes = new Int32Array(0);
    this.mask = 0;
  }

  /** Frees the slot of `id` (shifting back the rest of its cluster); its row, or -1. */
  private removeSlot(id: string): number {
    const h = hashOf(id);
    const mask = this.mask;
    let i = h & mask;
    for (;;) {
      const r = this.slotRows[i]!;
      if (r === EMPTY) return -1;
      if (this.slotHashes[i] === h && this.ids[r - 1] === id) break;
      i = (i + 1) & mask;
    }
    const row = this.slotRows[i]! - 1;
    // Backward shift: move each later member of the cluster whose home is not between the hole
    // and itself into the hole, so that no probe meets an empty slot before its key.
    for (let j = (i + 1) & mask; this.slotRows[j] !== EMPTY; j = (j + 1) & mask) {
      const home = this.slotHashes[j]! & mask;
      const between = i <= j ? i < home && home <= j : i < home || home <= j;
      if (between) continue;
      this.slotRows[i] = this.slotRows[j]!;
      this.slotHashes[i] = this.slotHashes[j]!;
      i = j;
    }
    this.slotRows[i] = EMPTY;
    this.slotHashes[i] = 0;
    return row;
  }

  private linkLast(id: string, row: number): void {
    if (row >= this.nextRow.length) {
      let n = this.nextRow.length * 2;
      while (n <= row) n *= 2;
      const next = new Int32Array(n);
      const prev = new Int32Array(n);
      next.set(this.nextRow);
      prev.set(this.prevRow);
      this.nextRow = next;
      this.prevRow = prev;
    }
    while (this.ids.length < row) this.ids.push(undefined);
    this.ids[row] = id;
    this.nextRow[row] = -1;
    this.prevRow[row] = this.tail;
    if (this.tail === -1) this.head = row;
    else this.nextRow[this.tail] = row;
    this.tail = row;
  }

  private unlink(row: number): void {
    const next = this.nextRow[row]!;
    const prev = this.prevRow[row]!;
    if (prev === -1) this.head = next;
    else this.nextRow[prev] = next;
    if (next === -1) this.tail = prev;
    else this.prevRow[next] = prev;
    this.ids[row] = undefined;
  }
}
