/**
 * Reading a decoded message (a request as @grpc/proto-loader hands it over, or one a node builds
 * for its own call): fields by name, nothing trusted, and the violations a check collects. The
 * public handlers (src/api/service-kit.ts) and the cluster operations (src/cluster) share them.
 */
import { ValidationError, type FieldViolation } from './errors.js';

/** A decoded message: fields by name, nothing trusted. */
export type Msg = Readonly<Record<string, unknown>>;

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
