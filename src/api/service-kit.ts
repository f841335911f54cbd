/**
 * What every public handler shares: the decoded request, the call context, and one way to
 * answer (a promise whose rejection is mapped by status-map.ts and logged once when INTERNAL).
 */
import type * as grpc from '@grpc/grpc-js';
import type { Msg } from './convert.js';
import { contextOf, type CallContext } from './router.js';
import { toServiceError } from './status-map.js';

// Reading a request's fields: shared with the cluster operations, so they live in src/base.
export { num, optNum, str, Violations } from '../base/fields.js';

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
