/**
 * The hash ring: contiguous ranges of the 32-bit space, each owned by one group. Ranges are
 * half-open [start, end) with end up to 2^32, so that together they cover the ring exactly.
 */
import { assertionFailed } from '../base/assert.js';

export const RING_SIZE = 2 ** 32;

export interface RingRange {
  readonly groupId: number;
  readonly start: number;
  readonly end: number;
}

/** Splits the ring into `count` near-equal ranges for groups firstGroupId, firstGroupId+1, … */
export function splitRing(count: number, firstGroupId: number): RingRange[] {
  if (!(Number.isSafeInteger(count) && count >= 1))
    assertionFailed(`group count must be >= 1, got ${count}`);
  const out: RingRange[] = [];
  for (let i = 0; i < count; i++) {
    out.push({
      groupId: firstGroupId + i,
      start: Math.floor((i * RING_SIZE) / count),
      end: Math.floor(((i + 1) * RING_SIZE) / count),
    });
  }
  return out;
}

/** The range holding `hash` (binary search over ranges sorted by start and covering the ring). */
export function lookupRange(ranges: readonly RingRange[], hash: number): RingRange {
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ranges[mid]!.start <= hash) lo = mid;
    else hi = mid - 1;
  }
  const r = ranges[lo];
  if (r === undefined || r.start > hash || hash >= r.end) {
    assertionFailed(`hash ${hash} not covered by the ring`);
  }
  return r;
}
