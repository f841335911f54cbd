/**
 * The byte encoding of durable records: msgpackr behind one leading version byte.
 *
 * Plain maps and arrays only (no shared record structures), so every record decodes on its own:
 * a shared structure table would have to be stored and agreed on by every replica, snapshot and
 * reader of the log. The version byte lets a later format be read beside this one; a byte this
 * code does not know is an error, never a guess.
 */
import { Packr, RESERVE_START_SPACE } from 'msgpackr';
import { TickraftError } from './errors.js';

/** The format written by encode(); the first byte of every encoded record. */
export const CODEC_VERSION = 1;

export type CodecErrorCode = 'CODEC_UNKNOWN_VERSION' | 'CODEC_MALFORMED';

/** Bytes that are not a record of a known version, or not the shape the reader expected. */
export class CodecError extends TickraftError {
  override readonly name = 'CodecError';
  declare readonly code: CodecErrorCode;

  constructor(code: CodecErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(code, message, options);
  }
}

const packr = new Packr({ useRecords: false, moreTypes: false });
/** A record this large gets a block of its own (see encode). */
const LARGE_RECORD_BYTES = 1024 * 1024;
/** msgpackr's own first block size. */
const BLOCK_BYTES = 8192;

/**
 * Encodes one record. The result is a view into a block msgpackr allocated and never writes over
 * again, so it stays valid; keeping many small results alive keeps their blocks alive too.
 */
export function encode(value: unknown): Uint8Array {
  // msgpackr leaves one byte free in front of the value for the version, which saves copying
  // every record into a fresh array (more than half the cost of encoding a log entry).
  const packed = packr.pack(value, RESERVE_START_SPACE | 1);
  // msgpackr grows its block to fit a large record and keeps carving later records from it, and
  // makes every later block as large: after one snapshot of tens of MiB, each small log entry
  // would pin a block of twice that size (a 10,000,000-job node held over a GiB of them). A
  // fresh small block after a large record keeps the large one alive only through its own result.
  if (packed.byteLength >= LARGE_RECORD_BYTES) packr.useBuffer(Buffer.allocUnsafeSlow(BLOCK_BYTES));
  // A plain Uint8Array view, not the Buffer msgpackr returns: Buffer's slice() shares memory
  // where Uint8Array's copies, a difference callers should not have to know about.
  const out = new Uint8Array(packed.buffer, packed.byteOffset, packed.byteLength);
  out[0] = CODEC_VERSION;
  return out;
}

/**
 * Decodes one record. The result is untrusted input: callers check its shape. Byte arrays in
 * the result are views into `bytes`, not copies.
 */
export function decode(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) throw new CodecError('CODEC_MALFORMED', 'empty record');
  const version = bytes[0];
  if (version !== CODEC_VERSION) {
    throw new CodecError(
      'CODEC_UNKNOWN_VERSION',
      `record version ${version} is not the known version ${CODEC_VERSION}`,
    );
  }
  try {
    // unpack() also rejects trailing bytes after the first value.
    return packr.unpack(bytes.subarray(1)) as unknown;
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new CodecError('CODEC_MALFORMED', `record does not decode: ${why}`, { cause });
  }
}
