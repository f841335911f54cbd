/**
 * Operating errors of the peer transport. A malformed frame names the offending field so a
 * version mismatch between two nodes is diagnosed from one log line; everything else is a
 * TickraftError with a TRANSPORT_* code.
 */
import { TickraftError } from '../base/errors.js';

export const MALFORMED_FRAME = 'TRANSPORT_MALFORMED_FRAME';
export const BIND_FAILED = 'TRANSPORT_BIND_FAILED';
export const INVALID_OPTIONS = 'TRANSPORT_INVALID_OPTIONS';
export const TRANSPORT_CLOSED = 'TRANSPORT_CLOSED';

/** A frame or chunk from a peer that does not decode or breaks a rule of proto/raft.proto. */
export class MalformedFrameError extends TickraftError {
  override readonly name = 'MalformedFrameError';
  /** Path of the offending field, e.g. `messages[3].entries[0].term`; `(frame)` for the whole. */
  readonly field: string;
  readonly reason: string;

  constructor(field: string, reason: string, options: { cause?: unknown } = {}) {
    super(MALFORMED_FRAME, `malformed frame: ${field}: ${reason}`, {
      ...options,
      details: { field, reason },
    });
    this.field = field;
    this.reason = reason;
  }
}

/** Other transport failures (bind, use after close). */
export class TransportError extends TickraftError {
  override readonly name = 'TransportError';
}
