/**
 * UTC offsets of one IANA zone as a cached table of constant-offset segments.
 *
 * Temporal (the polyfill, over ICU's tz data) is the only source of offsets and transitions, but
 * it is slow: about 30 µs to map one instant and a few hundred µs to find one transition. The
 * next-fire hot path therefore never calls it; it asks this table, which is filled lazily, one
 * fixed-length chunk of the time line at a time, and then answers with a Map lookup and a short
 * scan. Chunk edges appear as boundaries with no offset change, which the DST rules ignore, so
 * chunking never changes a result.
 *
 * Filling the table reads no clock: the same zone data gives the same table on every node.
 */
import { Temporal } from '@js-temporal/polyfill';
import { assert } from '../base/assert.js';

/** A maximal span `[startMs, endMs)` of one offset, as far as the table knows it. */
export interface ZoneSegment {
  readonly startMs: number;
  readonly endMs: number;
  readonly offsetMs: number;
  /** The offset just before `startMs`; equal to `offsetMs` when `startMs` is no transition. */
  readonly prevOffsetMs: number;
}

interface Chunk {
  /** Segment starts, ascending; the first is the chunk start. */
  readonly startsMs: readonly number[];
  readonly offsetsMs: readonly number[];
  readonly prevOffsetMs: number;
  readonly endMs: number;
}

/** 2^35 ms, about 398 days: a chunk holds at most a year's worth of transitions. */
const CHUNK_MS = 2 ** 35;

/** Temporal's instant range is ±10^8 days; keep chunk probes inside it. */
const TEMPORAL_LIMIT_MS = 8.64e15;

/** Cached tables stay small (a few numbers per year used), so one per zone lives forever. */
const tablesByZone = new Map<string, ZoneRules>();

export class ZoneRules {
  readonly timezone: string;
  private readonly chunks = new Map<number, Chunk>();
  private last: ZoneSegment;

  private constructor(timezone: string) {
    this.timezone = timezone;
    this.last = { startMs: 0, endMs: 0, offsetMs: 0, prevOffsetMs: 0 };
  }

  /** The shared table of a zone id that Temporal accepts (validated by the caller). */
  static forZone(timezone: string): ZoneRules {
    let rules = tablesByZone.get(timezone);
    if (rules === undefined) {
      rules = new ZoneRules(timezone);
      tablesByZone.set(timezone, rules);
    }
    return rules;
  }

  /** The segment containing `ms`. */
  segmentAt(ms: number): ZoneSegment {
    const last = this.last;
    if (ms >= last.startMs && ms < last.endMs) return last;
    const index = Math.floor(ms / CHUNK_MS);
    let chunk = this.chunks.get(index);
    if (chunk === undefined) {
      chunk = buildChunk(this.timezone, index);
      this.chunks.set(index, chunk);
    }
    const starts = chunk.startsMs;
    let i = starts.length - 1;
    while (i > 0 && (starts[i] ?? 0) > ms) i--;
    const segment: ZoneSegment = {
      startMs: starts[i] ?? 0,
      endMs: starts[i + 1] ?? chunk.endMs,
      offsetMs: chunk.offsetsMs[i] ?? 0,
      prevOffsetMs: i === 0 ? chunk.prevOffsetMs : (chunk.offsetsMs[i - 1] ?? 0),
    };
    this.last = segment;
    return segment;
  }

  /** The UTC offset in force at `ms`. */
  offsetAt(ms: number): number {
    return this.segmentAt(ms).offsetMs;
  }
}

function offsetFromTemporal(timezone: string, ms: number): number {
  const clamped = Math.min(Math.max(ms, -TEMPORAL_LIMIT_MS), TEMPORAL_LIMIT_MS);
  return (
    Temporal.Instant.fromEpochMilliseconds(clamped).toZonedDateTimeISO(timezone).offsetNanoseconds /
    1e6
  );
}

function buildChunk(timezone: string, index: number): Chunk {
  const startMs = index * CHUNK_MS;
  const endMs = startMs + CHUNK_MS;
  const startsMs = [startMs];
  const offsetsMs = [offsetFromTemporal(timezone, startMs)];
  // The offset just before the chunk tells whether a real transition sits exactly on its start.
  const prevOffsetMs = offsetFromTemporal(timezone, startMs - 1);
  if (Math.abs(startMs) < TEMPORAL_LIMIT_MS - 2 * CHUNK_MS) {
    let cursor: Temporal.ZonedDateTime | null =
      Temporal.Instant.fromEpochMilliseconds(startMs).toZonedDateTimeISO(timezone);
    for (;;) {
      cursor = cursor.getTimeZoneTransition('next');
      if (cursor === null || cursor.epochMilliseconds >= endMs) break;
      const offsetMs = cursor.offsetNanoseconds / 1e6;
      // Temporal reports offset changes only; keep that invariant explicit for the DST rules.
      assert(offsetMs !== offsetsMs[offsetsMs.length - 1], 'a transition must change the offset');
      startsMs.push(cursor.epochMilliseconds);
      offsetsMs.push(offsetMs);
    }
  }
  return { startsMs, offsetsMs, prevOffsetMs, endMs };
}
