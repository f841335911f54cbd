/**
 * The jobs of a data group, stored by column rather than as one object per job.
 *
 * A replica holds millions of jobs, and an object per job costs about 540 bytes in V8: some
 * thirty pointer fields, a boxed number for each timestamp, a map entry. Here a job is a row:
 * its id maps to a row number, its own numbers sit unboxed in Float64Array chunks, and its
 * definition is one pointer to a SharedSpec that every job with the same settings shares
 * (retained.ts). What stays per job is the id, the name, the row's numbers and three pointers;
 * numbers most jobs leave undefined take no room until some job in their chunk sets one.
 *
 * Reads hand out a fresh plain `Job` object each time: a copy, never a live view, so code that
 * keeps a job across later commands (an attempt in flight, an API reply) holds what it read.
 * Only the state machine writes, through the setters.
 */
import { assert, assertionFailed } from '../base/assert.js';
import { generalArray } from '../base/general-array.js';
import { IdIndex } from './id-index.js';
import type { Job } from './model.js';
import type { SharedSpec } from './retained.js';

/**
 * Rows per chunk: columns grow a chunk at a time, so no column is ever copied to grow; 4096 rows
 * keep an almost empty group's columns near 400 KiB.
 */
const CHUNK_BITS = 12;
const CHUNK = 1 << CHUNK_BITS;
const MASK = CHUNK - 1;

/**
 * A column of numbers, `undefined` stored as NaN (no field of a job is ever NaN). A chunk is
 * allocated by the first number written into it: a field most jobs leave undefined (an anchor,
 * a bound on fires, a finish time) costs nothing for them.
 */
class NumberColumn {
  private readonly chunks = generalArray<Float64Array | undefined>();

  get(row: number): number | undefined {
    const chunk = this.chunks[row >>> CHUNK_BITS];
    if (chunk === undefined) return undefined;
    const v = chunk[row & MASK]!;
    return Number.isNaN(v) ? undefined : v;
  }

  /** The value of a field that is never undefined. */
  must(row: number): number {
    return this.chunks[row >>> CHUNK_BITS]![row & MASK]!;
  }

  /** Each chunk's bytes (a view, not a copy), null where no chunk was allocated. */
  chunkBytes(): (Uint8Array | null)[] {
    return this.chunks.map((c) => (c === undefined ? null : new Uint8Array(c.buffer)));
  }

  /** Sets the chunks back from chunkBytes() (copied: the bytes may sit unaligned in a record). */
  loadChunkBytes(list: readonly (Uint8Array | null)[]): void {
    this.chunks.length = 0;
    for (const bytes of list) {
      if (bytes === null) {
        this.chunks.push(undefined);
        continue;
      }
      assert(bytes.byteLength === CHUNK * 8, 'a number chunk of the wrong size');
      const chunk = new Float64Array(CHUNK);
      new Uint8Array(chunk.buffer).set(bytes);
      this.chunks.push(chunk);
    }
  }

  set(row: number, v: number | undefined): void {
    const at = row >>> CHUNK_BITS;
    let chunk = this.chunks[at];
    if (chunk === undefined) {
      if (v === undefined) return;
      while (this.chunks.length <= at) this.chunks.push(undefined);
      chunk = this.chunks[at] = new Float64Array(CHUNK).fill(Number.NaN);
    }
    chunk[row & MASK] = v === undefined ? Number.NaN : v;
  }

  clear(): void {
    this.chunks.length = 0;
  }
}

/** A column of small integers (versions, flags). */
class IntColumn {
  private readonly chunks = generalArray<Int32Array>();

  get(row: number): number {
    return this.chunks[row >>> CHUNK_BITS]![row & MASK]!;
  }

  set(row: number, v: number): void {
    const chunk = row >>> CHUNK_BITS;
    while (this.chunks.length <= chunk) this.chunks.push(new Int32Array(CHUNK));
    this.chunks[chunk]![row & MASK] = v;
  }

  /** Each chunk's bytes (a view, not a copy). */
  chunkBytes(): Uint8Array[] {
    return this.chunks.map((c) => new Uint8Array(c.buffer));
  }

  /** Sets the chunks back from chunkBytes() (copied: the bytes may sit unaligned in a record). */
  loadChunkBytes(list: readonly Uint8Array[]): void {
    this.chunks.length = 0;
    for (const bytes of list) {
      assert(bytes.byteLength === CHUNK * 4, 'an integer chunk of the wrong size');
      const chunk = new Int32Array(CHUNK);
      new Uint8Array(chunk.buffer).set(bytes);
      this.chunks.push(chunk);
    }
  }

  clear(): void {
    this.chunks.length = 0;
  }
}

/** A column of references. Chunks are allocated whole so that they never grow by copying. */
class RefColumn<V> {
  private readonly chunks = generalArray<(V | undefined)[]>();

  get(row: number): V {
    return this.chunks[row >>> CHUNK_BITS]![row & MASK] as V;
  }

  set(row: number, v: V | undefined): void {
    const chunk = row >>> CHUNK_BITS;
    while (this.chunks.length <= chunk)
      this.chunks.push(new Array<V | undefined>(CHUNK).fill(undefined));
    this.chunks[chunk]![row & MASK] = v;
  }

  clear(): void {
    this.chunks.length = 0;
  }
}

/**
 * The whole table by column, for snapshots: each distinct definition once, then one element per
 * job in each column, in insertion order. `null` stands for undefined.
 */
export interface JobColumns {
  readonly specs: readonly SharedSpec[];
  readonly ids: readonly string[];
  /** Index into `specs`. */
  readonly specOf: readonly number[];
  readonly names: readonly string[];
  readonly anchorsMs: readonly (number | null)[];
  readonly versions: readonly number[];
  readonly paused: readonly number[];
  readonly createdAtMs: readonly number[];
  readonly updatedAtMs: readonly number[];
  readonly nextFireAtMs: readonly (number | null)[];
  readonly lastTokens: readonly number[];
  readonly remaining: readonly (number | null)[];
  readonly finishedAtMs: readonly (number | null)[];
}

/**
 * The table as it is held, for snapshots: the ids in insertion order with each one's row, name
 * and definition (an index into `specs`, each distinct definition once), the free rows, and every
 * number column's chunks as raw bytes. Taking one copies chunks instead of reading a number per
 * job, and loading one sets them back and adds each id once: a replica of millions of jobs
 * snapshots and restarts in a fraction of the time columns()/putColumns() take, and its loop
 * waits that much less while a snapshot is taken. Int32 lists are bytes too (`rows`,
 * `freeRows`, `specOf`).
 */
export interface JobTableImage {
  readonly rowCount: number;
  /**
   * The ids joined by newlines (no valid id has one), as UTF-8 bytes: one value encodes and
   * decodes in a fraction of the time a million strings do, and each id read out of the bytes is
   * a string of its own, where splitting one string makes views of it that must be copied again.
   * A list when some id does contain a newline; a string in the images of earlier versions.
   */
  readonly ids: Uint8Array | string | readonly string[];
  readonly rows: Uint8Array;
  /** The jobs that have a name: their places in `ids`, and the names. */
  readonly namedAt: Uint8Array;
  readonly names: readonly string[];
  readonly specs: readonly SharedSpec[];
  readonly specOf: Uint8Array;
  readonly freeRows: Uint8Array;
  readonly numbers: Readonly<Record<NumberField, readonly (Uint8Array | null)[]>>;
  readonly ints: Readonly<Record<IntField, readonly Uint8Array[]>>;
}

const NUMBER_FIELDS = [
  'anchorMs',
  'createdAtMs',
  'updatedAtMs',
  'nextFireAtMs',
  'lastToken',
  'remaining',
  'finishedAtMs',
] as const;
type NumberField = (typeof NUMBER_FIELDS)[number];
const INT_FIELDS = ['version', 'paused'] as const;
type IntField = (typeof INT_FIELDS)[number];

/** Numbers each distinct definition in the order first met (a snapshot lists each once). */
class SpecNumbering {
  readonly specs: SharedSpec[] = [];
  private readonly index = new Map<SharedSpec, number>();

  indexOf(spec: SharedSpec): number {
    let at = this.index.get(spec);
    if (at === undefined) {
      at = this.specs.length;
      this.index.set(spec, at);
      this.specs.push(spec);
    }
    return at;
  }
}

/** An Int32 list as bytes, and back (copied: the bytes may sit unaligned in a record). */
function int32Bytes(list: Int32Array): Uint8Array {
  return new Uint8Array(list.buffer, list.byteOffset, list.byteLength);
}

function int32sOf(bytes: Uint8Array): Int32Array {
  assert(bytes.byteLength % 4 === 0, 'an int32 list of a length not a multiple of 4');
  const out = new Int32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

/** The ids of a JobTableImage as a list; read from bytes, each is a string of its own. */
function idsOf(ids: JobTableImage['ids']): readonly string[] {
  if (typeof ids === 'string') return ids === '' ? [] : ids.split('\n');
  if (!(ids instanceof Uint8Array)) return ids;
  const bytes = Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength);
  const out: string[] = [];
  if (bytes.length === 0) return out;
  for (let start = 0; ;) {
    const end = bytes.indexOf(NEWLINE, start);
    if (end === -1) {
      out.push(bytes.toString('utf8', start));
      return out;
    }
    out.push(bytes.toString('utf8', start, end));
    start = end + 1;
  }
}

/** '\n' in UTF-8: never part of another character's bytes. */
const NEWLINE = 0x0a;

/** What a job has beside its definition. */
export interface JobRowState {
  readonly version: number;
  readonly paused: boolean;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  readonly nextFireAtMs: number | undefined;
  readonly lastToken: number;
  readonly remaining: number | undefined;
  readonly finishedAtMs: number | undefined;
}

/** The part of a job a fire intent is checked against and changes (JobTable.firingOf). */
export type JobFiring = Pick<Job, 'id' | 'version' | 'paused' | 'nextFireAtMs' | 'remaining'>;

export class JobTable {
  /** id → row, in insertion order (iteration and snapshots follow it). */
  private readonly rows = new IdIndex();
  private readonly freeRows: number[] = [];
  private rowCount = 0;
  private readonly spec = new RefColumn<SharedSpec>();
  private readonly name = new RefColumn<string>();
  private readonly anchorMs = new NumberColumn();
  private readonly version = new IntColumn();
  private readonly paused = new IntColumn();
  private readonly createdAtMs = new NumberColumn();
  private readonly updatedAtMs = new NumberColumn();
  private readonly nextFireAtMs = new NumberColumn();
  /** Jobs whose next slot is defined (the planning index's size). */
  private withNextFire = 0;
  /** Jobs per tenant (a tenant's quota is checked against it). */
  private readonly perTenant = new Map<string, number>();
  private readonly lastToken = new NumberColumn();
  private readonly remaining = new NumberColumn();
  private readonly finishedAtMs = new NumberColumn();

  get size(): number {
    return this.rows.size;
  }

  has(id: string): boolean {
    return this.rows.get(id) !== -1;
  }

  /** Jobs that have a next slot. */
  get withNextFireCount(): number {
    return this.withNextFire;
  }

  /**
   * Calls `f` for every job whose next slot is in [fromMs, toMs), in table order. A pass reads
   * one number per job and allocates nothing: the planning index finds the slots coming into
   * its horizon this way instead of holding an entry per job.
   */
  scanNextFire(fromMs: number, toMs: number, f: (id: string, nextFireAtMs: number) => void): void {
    this.rows.forEach((id, row) => {
      const next = this.nextFireAtMs.get(row);
      if (next !== undefined && next >= fromMs && next < toMs) f(id, next);
    });
  }

  /**
   * The earliest next slot of any job, or undefined when none has one. One pass over the
   * column: asked only of a quiet group (nothing applied since the last answer), to know how
   * long it may stay quiet.
   */
  earliestNextFire(): number | undefined {
    let best = Infinity;
    this.rows.forEach((_id, row) => {
      const next = this.nextFireAtMs.get(row);
      if (next !== undefined && next < best) best = next;
    });
    return best === Infinity ? undefined : best;
  }

  private setNext(row: number, nextFireAtMs: number | undefined): void {
    const was = this.nextFireAtMs.get(row) !== undefined;
    const is = nextFireAtMs !== undefined;
    if (was !== is) this.withNextFire += is ? 1 : -1;
    this.nextFireAtMs.set(row, nextFireAtMs);
  }

  /** A copy of the job as it is now. */
  get(id: string): Job | undefined {
    const row = this.rows.get(id);
    // The table's own copy of the id: what a caller keeps of the job (a run's job id) then
    // shares it, rather than keeping the caller's string, often a slice of a whole log entry.
    return row === -1 ? undefined : this.read(this.rows.idAt(row)!, row);
  }

  keys(): Generator<string, void, undefined> {
    return this.rows.keys();
  }

  *values(): Generator<Job, void, undefined> {
    for (const [id, row] of this.rows.entries()) yield this.read(id, row);
  }

  /** How many jobs the tenant has here. */
  countOfTenant(tenant: string): number {
    return this.perTenant.get(tenant) ?? 0;
  }

  private countTenant(tenant: string, n: number): void {
    const left = (this.perTenant.get(tenant) ?? 0) + n;
    if (left === 0) this.perTenant.delete(tenant);
    else this.perTenant.set(tenant, left);
  }

  /** The ids of a tenant's jobs, in insertion order; reads no job it does not return. */
  idsOfTenant(tenant: string): string[] {
    const out: string[] = [];
    if (!this.perTenant.has(tenant)) return out;
    this.rows.forEach((id, row) => {
      if (this.spec.get(row).tenant === tenant) out.push(id);
    });
    return out;
  }

  /** Adds a job, or replaces the definition and state of the job with this id. */
  put(
    id: string,
    spec: SharedSpec,
    name: string,
    anchorMs: number | undefined,
    st: JobRowState,
  ): void {
    let row = this.rows.get(id);
    if (row === -1) {
      row = this.freeRows.pop() ?? this.rowCount++;
      this.rows.add(id, row);
    } else this.countTenant(this.spec.get(row).tenant, -1);
    this.countTenant(spec.tenant, 1);
    this.spec.set(row, spec);
    this.name.set(row, name);
    this.anchorMs.set(row, anchorMs);
    this.version.set(row, st.version);
    this.paused.set(row, st.paused ? 1 : 0);
    this.createdAtMs.set(row, st.createdAtMs);
    this.updatedAtMs.set(row, st.updatedAtMs);
    this.setNext(row, st.nextFireAtMs);
    this.lastToken.set(row, st.lastToken);
    this.remaining.set(row, st.remaining);
    this.finishedAtMs.set(row, st.finishedAtMs);
  }

  /**
   * Adds a job created now (version 1, not paused, never fired), unless a job with this id is
   * in the table: then nothing changes and the answer is false. Bulk registration's path: one
   * lookup and one insert per job, and no state object.
   */
  addNew(
    id: string,
    spec: SharedSpec,
    name: string,
    anchorMs: number | undefined,
    atMs: number,
    nextFireAtMs: number | undefined,
    remaining: number | undefined,
  ): boolean {
    if (!this.rows.probeAbsent(id)) return false;
    const row = this.freeRows.pop() ?? this.rowCount++;
    this.rows.addProbed(id, row);
    this.countTenant(spec.tenant, 1);
    this.spec.set(row, spec);
    this.name.set(row, name);
    this.anchorMs.set(row, anchorMs);
    this.version.set(row, 1);
    this.paused.set(row, 0);
    this.createdAtMs.set(row, atMs);
    this.updatedAtMs.set(row, atMs);
    this.setNext(row, nextFireAtMs);
    this.lastToken.set(row, 0);
    this.remaining.set(row, remaining);
    this.finishedAtMs.set(row, undefined);
    return true;
  }

  delete(id: string): boolean {
    const row = this.rows.delete(id);
    if (row === -1) return false;
    this.countTenant(this.spec.get(row).tenant, -1);
    this.setNext(row, undefined);
    // Drop the references so that the collector can free what only this job used.
    this.spec.set(row, undefined);
    this.name.set(row, undefined);
    this.freeRows.push(row);
    return true;
  }

  clear(): void {
    this.rows.clear();
    this.freeRows.length = 0;
    this.rowCount = 0;
    this.withNextFire = 0;
    this.perTenant.clear();
    for (const c of [this.spec, this.name, this.version, this.paused]) c.clear();
    for (const c of [
      this.anchorMs,
      this.createdAtMs,
      this.updatedAtMs,
      this.nextFireAtMs,
      this.lastToken,
      this.remaining,
      this.finishedAtMs,
    ])
      c.clear();
  }

  /**
   * Where the table's derived parts disagree with its rows (empty when they agree): the id
   * index, the count of jobs with a next slot, and the free list. The simulator's agreement
   * check compares them with what a full scan rebuilds.
   */
  audit(): string[] {
    const out = this.rows.audit();
    let withNext = 0;
    const live = new Set<number>();
    const perTenant = new Map<string, number>();
    this.rows.forEach((_, row) => {
      live.add(row);
      if (this.nextFireAtMs.get(row) !== undefined) withNext++;
      const tenant = this.spec.get(row).tenant;
      perTenant.set(tenant, (perTenant.get(tenant) ?? 0) + 1);
    });
    for (const tenant of new Set([...perTenant.keys(), ...this.perTenant.keys()]))
      if (perTenant.get(tenant) !== this.perTenant.get(tenant))
        out.push(
          `job table: counts ${this.perTenant.get(tenant) ?? 0} jobs of tenant ${tenant}, a scan finds ${perTenant.get(tenant) ?? 0}`,
        );
    if (withNext !== this.withNextFire)
      out.push(
        `job table: counts ${this.withNextFire} jobs with a next slot, a scan finds ${withNext}`,
      );
    for (const row of this.freeRows)
      if (live.has(row)) out.push(`job table: row ${row} is both free and in use`);
    return out;
  }

  /** Every job by column: snapshot version 2, which restore() still reads. */
  columns(): JobColumns {
    const numbering = new SpecNumbering();
    const c = {
      specs: numbering.specs,
      ids: [] as string[],
      specOf: [] as number[],
      names: [] as string[],
      anchorsMs: [] as (number | null)[],
      versions: [] as number[],
      paused: [] as number[],
      createdAtMs: [] as number[],
      updatedAtMs: [] as number[],
      nextFireAtMs: [] as (number | null)[],
      lastTokens: [] as number[],
      remaining: [] as (number | null)[],
      finishedAtMs: [] as (number | null)[],
    };
    for (const [id, row] of this.rows.entries()) {
      c.ids.push(id);
      c.specOf.push(numbering.indexOf(this.spec.get(row)));
      c.names.push(this.name.get(row));
      c.anchorsMs.push(this.anchorMs.get(row) ?? null);
      c.versions.push(this.version.get(row));
      c.paused.push(this.paused.get(row));
      c.createdAtMs.push(this.createdAtMs.must(row));
      c.updatedAtMs.push(this.updatedAtMs.must(row));
      c.nextFireAtMs.push(this.nextFireAtMs.get(row) ?? null);
      c.lastTokens.push(this.lastToken.must(row));
      c.remaining.push(this.remaining.get(row) ?? null);
      c.finishedAtMs.push(this.finishedAtMs.get(row) ?? null);
    }
    return c;
  }

  /**
   * Adds every job of `c` (a table's columns()), each with the definition `specOf(k)` gives
   * for `c.specs[k]` (the caller interns them).
   */
  putColumns(c: JobColumns, specOf: (k: number) => SharedSpec, flat: (s: string) => string): void {
    const n = c.ids.length;
    for (const col of [
      c.specOf,
      c.names,
      c.anchorsMs,
      c.versions,
      c.paused,
      c.createdAtMs,
      c.updatedAtMs,
      c.nextFireAtMs,
      c.lastTokens,
      c.remaining,
      c.finishedAtMs,
    ])
      assert(col.length === n, 'job columns of different lengths');
    for (let i = 0; i < n; i++) {
      const name = c.names[i]!;
      this.put(
        flat(c.ids[i]!),
        specOf(c.specOf[i]!),
        name === '' ? '' : flat(name),
        c.anchorsMs[i] ?? undefined,
        {
          version: c.versions[i]!,
          paused: c.paused[i] === 1,
          createdAtMs: c.createdAtMs[i]!,
          updatedAtMs: c.updatedAtMs[i]!,
          nextFireAtMs: c.nextFireAtMs[i] ?? undefined,
          lastToken: c.lastTokens[i]!,
          remaining: c.remaining[i] ?? undefined,
          finishedAtMs: c.finishedAtMs[i] ?? undefined,
        },
      );
    }
  }

  /** The table as it is held (JobTableImage), for a snapshot. */
  image(): JobTableImage {
    const n = this.rows.size;
    const ids: string[] = new Array<string>(n);
    const names: string[] = [];
    const namedAt: number[] = [];
    let newline = false;
    const rows = new Int32Array(n);
    const specOf = new Int32Array(n);
    const numbering = new SpecNumbering();
    let k = 0;
    this.rows.forEach((id, row) => {
      ids[k] = id;
      if (id.includes('\n')) newline = true;
      const name = this.name.get(row);
      if (name !== '') {
        namedAt.push(k);
        names.push(name);
      }
      rows[k] = row;
      specOf[k] = numbering.indexOf(this.spec.get(row));
      k++;
    });
    const numbers = {} as Record<NumberField, (Uint8Array | null)[]>;
    for (const f of NUMBER_FIELDS) numbers[f] = this[f].chunkBytes();
    const ints = {} as Record<IntField, Uint8Array[]>;
    for (const f of INT_FIELDS) ints[f] = this[f].chunkBytes();
    return {
      rowCount: this.rowCount,
      ids: newline ? ids : Buffer.from(ids.join('\n'), 'utf8'),
      rows: int32Bytes(rows),
      namedAt: int32Bytes(Int32Array.from(namedAt)),
      names,
      specs: numbering.specs,
      specOf: int32Bytes(specOf),
      freeRows: int32Bytes(Int32Array.from(this.freeRows)),
      numbers,
      ints,
    };
  }

  /**
   * Replaces the table with `img` (an image()), each definition the one `specOf(k)` gives for
   * `img.specs[k]` and each name, and each id not read from bytes, passed through `flat` (the
   * caller copies them).
   */
  loadImage(
    img: JobTableImage,
    specOf: (k: number) => SharedSpec,
    flat: (s: string) => string,
  ): void {
    const own = img.ids instanceof Uint8Array;
    const ids = idsOf(img.ids);
    const n = ids.length;
    const rows = int32sOf(img.rows);
    const specIndexes = int32sOf(img.specOf);
    const namedAt = int32sOf(img.namedAt);
    assert(
      rows.length === n && specIndexes.length === n && namedAt.length === img.names.length,
      'job table image: lists of different lengths',
    );
    this.clear();
    this.rowCount = img.rowCount;
    for (const f of NUMBER_FIELDS) this[f].loadChunkBytes(img.numbers[f]);
    for (const f of INT_FIELDS) this[f].loadChunkBytes(img.ints[f]);
    this.rows.reserve(n, img.rowCount);
    const specs = img.specs.map((_, k) => specOf(k));
    const perSpec = new Int32Array(specs.length);
    for (let k = 0; k < n; k++) {
      const row = rows[k]!;
      assert(row >= 0 && row < img.rowCount, 'job table image: a row out of range');
      const spec = specIndexes[k]!;
      assert(spec >= 0 && spec < specs.length, 'job table image: a definition out of range');
      this.rows.add(own ? ids[k]! : flat(ids[k]!), row);
      this.spec.set(row, specs[spec]);
      this.name.set(row, '');
      perSpec[spec]!++;
      if (this.nextFireAtMs.get(row) !== undefined) this.withNextFire++;
    }
    namedAt.forEach((k, i) => {
      assert(k >= 0 && k < n, 'job table image: a name out of range');
      this.name.set(rows[k]!, flat(img.names[i]!));
    });
    for (const row of int32sOf(img.freeRows)) {
      assert(row >= 0 && row < img.rowCount, 'job table image: a free row out of range');
      this.freeRows.push(row);
    }
    specs.forEach((spec, k) => {
      if (perSpec[k]! > 0) this.countTenant(spec.tenant, perSpec[k]!);
    });
  }

  // Single fields without copying the job: for the hot paths (every run of a spike asks).

  /** The table's own copy of the id, undefined when there is no such job. */
  ownId(id: string): string | undefined {
    const row = this.rows.get(id);
    return row === -1 ? undefined : this.rows.idAt(row);
  }

  /**
   * What a fire intent is checked against and changes (the ids the table's own copy), without
   * copying the whole job; undefined when there is no such job.
   */
  firingOf(id: string): JobFiring | undefined {
    const row = this.rows.get(id);
    if (row === -1) return undefined;
    return {
      id: this.rows.idAt(row)!,
      version: this.version.get(row),
      paused: this.paused.get(row) === 1,
      nextFireAtMs: this.nextFireAtMs.get(row),
      remaining: this.remaining.get(row),
    };
  }

  /** Whether the job is paused; undefined when there is no such job. */
  pausedOf(id: string): boolean | undefined {
    const row = this.rows.get(id);
    return row === -1 ? undefined : this.paused.get(row) === 1;
  }

  /** The job's definition version, undefined when there is no such job. */
  versionOf(id: string): number | undefined {
    const row = this.rows.get(id);
    return row === -1 ? undefined : this.version.get(row);
  }

  /** The job's next slot, undefined when it has none, or null when there is no such job. */
  nextFireOrMissing(id: string): number | undefined | null {
    const row = this.rows.get(id);
    return row === -1 ? null : this.nextFireAtMs.get(row);
  }

  /** The job's shared definition (tenant, target, policies…); undefined when there is no job. */
  specOf(id: string): SharedSpec | undefined {
    const row = this.rows.get(id);
    return row === -1 ? undefined : this.spec.get(row);
  }

  /** Raises the job's last token to `token` if it is higher; no-op when there is no job. */
  raiseLastToken(id: string, token: number): void {
    const row = this.rows.get(id);
    if (row !== -1 && token > this.lastToken.must(row)) this.lastToken.set(row, token);
  }

  // Field access for the state machine: by id, for a job that must exist.

  private rowOf(id: string): number {
    const row = this.rows.get(id);
    if (row === -1) assertionFailed(`job ${id} is not in the table`);
    return row;
  }

  setPaused(id: string, paused: boolean, atMs: number): void {
    const row = this.rowOf(id);
    this.paused.set(row, paused ? 1 : 0);
    this.updatedAtMs.set(row, atMs);
  }

  setNextFire(id: string, nextFireAtMs: number | undefined): void {
    this.setNext(this.rowOf(id), nextFireAtMs);
  }

  setRemaining(id: string, remaining: number | undefined): void {
    this.remaining.set(this.rowOf(id), remaining);
  }

  setLastToken(id: string, token: number): void {
    this.lastToken.set(this.rowOf(id), token);
  }

  setFinishedAt(id: string, atMs: number | undefined): void {
    this.finishedAtMs.set(this.rowOf(id), atMs);
  }

  /**
   * The job as one plain object, built field by field in one fixed order so that every copy
   * shares one hidden class (the order of JobSpec, then the job's own state).
   */
  private read(id: string, row: number): Job {
    const s = this.spec.get(row);
    return {
      tenant: s.tenant,
      name: this.name.get(row),
      schedule: s.schedule,
      timezone: s.timezone,
      anchorMs: this.anchorMs.get(row),
      target: s.target,
      payload: s.payload,
      delivery: s.delivery,
      retry: s.retry,
      attemptDeadlineMs: s.attemptDeadlineMs,
      misfire: s.misfire,
      overlap: s.overlap,
      priority: s.priority,
      startAtMs: s.startAtMs,
      endAtMs: s.endAtMs,
      remainingFires: s.remainingFires,
      dependsOn: s.dependsOn,
      id,
      version: this.version.get(row),
      paused: this.paused.get(row) === 1,
      createdAtMs: this.createdAtMs.must(row),
      updatedAtMs: this.updatedAtMs.must(row),
      nextFireAtMs: this.nextFireAtMs.get(row),
      lastToken: this.lastToken.must(row),
      remaining: this.remaining.get(row),
      finishedAtMs: this.finishedAtMs.get(row),
    };
  }
}
