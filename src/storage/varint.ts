/**
 * Unsigned LEB128 varints for the binary log records: 7 bits per byte, low bits first, in their
 * shortest form, each below 2^53 (a safe integer). Readers treat the bytes as untrusted: a
 * truncated, overlong or non-shortest varint is a CodecError naming the record and field.
 */
import { CodecError } from '../base/codec.js';

/** Largest varint of a safe integer: 8 bytes of 7 bits (2^56 > 2^53). */
export const VARINT_BYTES_MAX = 8;

export function malformed(what: string, why: string): CodecError {
  return new CodecError('CODEC_MALFORMED', `${what}: ${why}`);
}

export function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

/** Writes `v` at `at`; returns the offset after it. */
export function writeVarint(out: Uint8Array, at: number, v: number): number {
  while (v >= 0x80) {
    out[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[at++] = v;
  return at;
}

/** A varint read from a record: its value and the offset after it (reused to save garbage). */
export interface Varint {
  value: number;
  next: number;
}

/** Reads the varint at `at` into `out`; `what` and `field` name it in the error. */
export function readVarint(
  bytes: Uint8Array,
  at: number,
  what: string,
  field: string,
  out: Varint,
): void {
  let value = 0;
  let scale = 1;
  for (let k = 0; k < VARINT_BYTES_MAX; k++) {
    const b = bytes[at + k];
    if (b === undefined) throw malformed(what, `truncated in the ${field}`);
    value += (b & 0x7f) * scale;
    if (b < 0x80) {
      if (b === 0 && k > 0) throw malformed(what, `${field} is not a shortest varint`);
      if (!Number.isSafeInteger(value)) {
        throw malformed(what, `${field} ${value} is not below 2^53`);
      }
      out.value = value;
      out.next = at + k + 1;
      return;
    }
    scale *= 0x80;
  }
  throw malformed(what, `${field} is longer than ${VARINT_BYTES_MAX} bytes`);
}
