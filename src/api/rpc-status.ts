/**
 * google.rpc.Status with BadRequest and RetryInfo details, encoded and decoded by hand (proto3
 * wire format, field numbers of proto/google/rpc/*.proto). Servers put it in the
 * `grpc-status-details-bin` trailer, where rich-error clients of any language look for it. Four
 * small messages do not justify a runtime protobuf dependency of our own.
 */
import type { FieldViolation } from '../base/errors.js';

export const BAD_REQUEST_TYPE_URL = 'type.googleapis.com/google.rpc.BadRequest';
export const RETRY_INFO_TYPE_URL = 'type.googleapis.com/google.rpc.RetryInfo';

export interface RpcStatus {
  readonly code: number;
  readonly message: string;
  /** BadRequest field violations, when the status carries them. */
  readonly violations: readonly FieldViolation[];
  /** RetryInfo's delay in ms, when the status carries it. */
  readonly retryDelayMs: number | undefined;
}

// ---------------------------------------------------------------------------------------------
// Encoding

class Writer {
  private readonly parts: Buffer[] = [];

  varint(n: number): this {
    // Invariant: n is a non-negative safe integer (codes, lengths, seconds).
    const bytes: number[] = [];
    let v = n;
    while (v >= 0x80) {
      bytes.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    bytes.push(v);
    this.parts.push(Buffer.from(bytes));
    return this;
  }

  tag(field: number, wireType: 0 | 2): this {
    return this.varint(field * 8 + wireType);
  }

  uint(field: number, n: number): this {
    return n === 0 ? this : this.tag(field, 0).varint(n);
  }

  bytes(field: number, b: Uint8Array): this {
    this.tag(field, 2).varint(b.length);
    this.parts.push(Buffer.from(b));
    return this;
  }

  string(field: number, s: string): this {
    return s === '' ? this : this.bytes(field, Buffer.from(s, 'utf8'));
  }

  finish(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function any(typeUrl: string, value: Buffer): Buffer {
  return new Writer().string(1, typeUrl).bytes(2, value).finish();
}

export function encodeRpcStatus(s: {
  code: number;
  message: string;
  violations?: readonly FieldViolation[];
  retryDelayMs?: number | undefined;
}): Buffer {
  const w = new Writer().uint(1, s.code).string(2, s.message);
  if (s.violations && s.violations.length > 0) {
    const br = new Writer();
    for (const v of s.violations)
      br.bytes(1, new Writer().string(1, v.field).string(2, v.reason).finish());
    w.bytes(3, any(BAD_REQUEST_TYPE_URL, br.finish()));
  }
  if (s.retryDelayMs !== undefined) {
    const ms = Math.max(0, Math.round(s.retryDelayMs));
    const duration = new Writer()
      .uint(1, Math.floor(ms / 1000))
      .uint(2, (ms % 1000) * 1_000_000)
      .finish();
    w.bytes(3, any(RETRY_INFO_TYPE_URL, new Writer().bytes(1, duration).finish()));
  }
  return w.finish();
}

// ---------------------------------------------------------------------------------------------
// Decoding

/** Bytes that are not the message they claim to be. */
export class RpcStatusDecodeError extends Error {
  readonly code = 'RPC_STATUS_MALFORMED';
}

type Field = { readonly no: number; readonly int: number; readonly bytes: Buffer | undefined };

function* fields(buf: Buffer): Generator<Field> {
  let pos = 0;
  const varint = (): number => {
    let n = 0;
    let mul = 1;
    for (;;) {
      if (pos >= buf.length) throw new RpcStatusDecodeError('truncated varint');
      const b = buf[pos++]!;
      n += (b & 0x7f) * mul;
      if (b < 0x80) return n;
      mul *= 0x80;
      if (mul > 2 ** 63) throw new RpcStatusDecodeError('varint too long');
    }
  };
  while (pos < buf.length) {
    const tag = varint();
    const no = Math.floor(tag / 8);
    switch (tag % 8) {
      case 0:
        yield { no, int: varint(), bytes: undefined };
        break;
      case 2: {
        const len = varint();
        if (pos + len > buf.length) throw new RpcStatusDecodeError('truncated field');
        yield { no, int: 0, bytes: buf.subarray(pos, pos + len) };
        pos += len;
        break;
      }
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      default:
        throw new RpcStatusDecodeError(`unsupported wire type ${tag % 8}`);
    }
  }
}

export function decodeRpcStatus(buf: Buffer): RpcStatus {
  let code = 0;
  let message = '';
  const violations: FieldViolation[] = [];
  let retryDelayMs: number | undefined;
  for (const f of fields(buf)) {
    if (f.no === 1) code = f.int;
    else if (f.no === 2 && f.bytes) message = f.bytes.toString('utf8');
    else if (f.no === 3 && f.bytes) {
      let typeUrl = '';
      let value: Buffer = Buffer.alloc(0);
      for (const a of fields(f.bytes)) {
        if (a.no === 1 && a.bytes) typeUrl = a.bytes.toString('utf8');
        else if (a.no === 2 && a.bytes) value = a.bytes;
      }
      if (typeUrl === BAD_REQUEST_TYPE_URL) {
        for (const fv of fields(value)) {
          if (fv.no !== 1 || !fv.bytes) continue;
          let field = '';
          let reason = '';
          for (const x of fields(fv.bytes)) {
            if (x.no === 1 && x.bytes) field = x.bytes.toString('utf8');
            else if (x.no === 2 && x.bytes) reason = x.bytes.toString('utf8');
          }
          violations.push({ field, reason });
        }
      } else if (typeUrl === RETRY_INFO_TYPE_URL) {
        for (const d of fields(value)) {
          if (d.no !== 1 || !d.bytes) continue;
          let seconds = 0;
          let nanos = 0;
          for (const x of fields(d.bytes)) {
            if (x.no === 1) seconds = x.int;
            else if (x.no === 2) nanos = x.int;
          }
          retryDelayMs = seconds * 1000 + Math.round(nanos / 1_000_000);
        }
      }
    }
  }
  return { code, message, violations, retryDelayMs };
}
