/**
 * What every public handler shares: the decoded request, the call context, and one way to
 * answer (a promise whose rejection is mapped by status-map.ts and logged once when INTERNAL).
 */
import type * as grpc from '@grpc/grpc-js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import type { Msg } from './convert.js';
import { contextOf, type CallContext } from './router.js';
import { toServiceError } from './status-map.js';

export interface ApiLogger {
  error(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
}

export type Handler = (req: Msg, ctx: CallContext) => Promise<unknown>;

/** A grpc-js unary handler around `fn`. */
export function unary(
  name: string,
  fn: Handler,
  log: ApiLogger,
): grpc.handleUnaryCall<Msg, unknown> {
  return (call, cb) => {
    let p: Promise<unknown>;
    try {
      p = fn(call.request, contextOf(call));
    } catch (err) {
      p = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    p.then(
      (res) => cb(null, res),
      (err: unknown) => {
        const mapped = toServiceError(err);
        if (mapped.correlationId !== undefined)
          log.error(
            {
              method: name,
              correlationId: mapped.correlationId,
              err: err instanceof Error ? err.stack : String(err),
            },
            'internal error in an API call',
          );
        cb(mapped.error);
      },
    );
  };
}

/** Collects violations of request fields and throws them together. */
export class Violations {
  readonly list: FieldViolation[] = [];

  add(field: string, reason: string): this {
    this.list.push({ field, reason });
    return this;
  }

  throwIfAny(code = 'REQUEST_INVALID'): void {
    if (this.list.length > 0) throw new ValidationError(code, this.list);
  }
}

export function str(req: Msg, key: string): string {
  const v = req[key];
  return typeof v === 'string' ? v : '';
}

export function num(req: Msg, key: string): number {
  const v = req[key];
  return typeof v === 'number' ? v : 0;
}

/** A proto3 `optional` number: undefined when absent. */
export function optNum(req: Msg, key: string): number | undefined {
  const v = req[key];
  return typeof v === 'number' ? v : undefined;
}
