/**
 * A request message from an HTTP request: its path variables, then its JSON body or its query
 * string, read against the message's type in proto/tickraft.proto as the protobuf JSON mapping
 * reads them, but strictly, so that a mistake is a 400 naming the field rather than a field
 * silently dropped:
 *
 * - fields by their JSON name (`jobId`) or their proto name (`job_id`); an unknown one is refused;
 * - `null` is the same as absent;
 * - 64-bit integers as JSON numbers (or decimal strings), within ±2^53; 32-bit ones in range;
 * - enums by name (`RUN_STATUS_DEAD`), or by number (the server then refuses a number it does
 *   not know, naming the field); an unknown name is refused here, with the names allowed;
 * - query parameters name a field by its path (`page_size`, `retention.history_per_job`), once
 *   each, or once per element of a repeated field.
 *
 * Violations are named as the gRPC API names them (docs/API.md, Errors): the proto path in
 * snake_case (`spec.retry.max_attempts`, `jobs[2].spec.tenant`), and all of them are reported at
 * once.
 */
import type protobuf from 'protobufjs/light.js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import type { HttpRoute } from './routes.js';

export type Msg = Record<string, unknown>;

/** The code of a request the HTTP layer refuses before any RPC (INVALID_ARGUMENT). */
export const REQUEST_INVALID = 'REQUEST_INVALID';

type FieldIndex = ReadonlyMap<string, protobuf.Field>;
const indexes = new WeakMap<protobuf.Type, FieldIndex>();

/** A type's fields by JSON name and by proto name (own keys only: `__proto__` is no field). */
function fieldsOf(type: protobuf.Type): FieldIndex {
  let index = indexes.get(type);
  if (!index) {
    const m = new Map<string, protobuf.Field>();
    for (const f of type.fieldsArray) {
      m.set(f.name, f);
      m.set(snakeCase(f.name), f);
    }
    index = m;
    indexes.set(type, index);
  }
  return index;
}

/** The proto name of a field parsed with camelCase names (every tickraft field is snake_case). */
export function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** protobufjs' own camelCase: `max_attempts` → `maxAttempts`. */
function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m: string, c: string) => c.toUpperCase());
}

const INT_RANGE: Readonly<Record<string, readonly [number, number]>> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  sint32: [-(2 ** 31), 2 ** 31 - 1],
  sfixed32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  fixed32: [0, 2 ** 32 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sint64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  sfixed64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
  fixed64: [0, Number.MAX_SAFE_INTEGER],
};

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${JSON.stringify(value)}`;
}

function isObject(value: unknown): value is Msg {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

class Reader {
  readonly violations: FieldViolation[] = [];

  bad(field: string, reason: string): undefined {
    this.violations.push({ field: field === '' ? '(body)' : field, reason });
    return undefined;
  }

  /** A JSON object as a message of `type`. */
  message(type: protobuf.Type, value: unknown, path: string): Msg | undefined {
    if (!isObject(value))
      return this.bad(path, `must be a JSON object (a ${type.name}), got ${describe(value)}`);
    const out: Msg = {};
    const index = fieldsOf(type);
    const seen = new Map<string, string>();
    for (const [key, v] of Object.entries(value)) {
      const at = path === '' ? key : `${path}.${key}`;
      const f = index.get(key);
      if (f === undefined) {
        this.bad(at, `unknown field of ${type.name}`);
        continue;
      }
      const other = seen.get(f.name);
      if (other !== undefined) {
        this.bad(at, `given twice (also as ${other})`);
        continue;
      }
      seen.set(f.name, key);
      if (v === null) continue;
      const name = path === '' ? snakeCase(f.name) : `${path}.${snakeCase(f.name)}`;
      const converted = this.field(f, v, name);
      if (converted !== undefined) out[f.name] = converted;
    }
    return out;
  }

  private field(f: protobuf.Field, v: unknown, path: string): unknown {
    if (f.map) {
      if (!isObject(v)) return this.bad(path, `must be a JSON object (a map), got ${describe(v)}`);
      const out: Msg = {};
      for (const [k, item] of Object.entries(v)) {
        const one = this.single(f, item, `${path}.${k}`);
        if (one !== undefined) out[k] = one;
      }
      return out;
    }
    if (f.repeated) {
      if (!Array.isArray(v)) return this.bad(path, `must be a JSON array, got ${describe(v)}`);
      const out: unknown[] = [];
      for (const [i, item] of (v as unknown[]).entries()) {
        const one = this.single(f, item, `${path}[${i}]`);
        if (one !== undefined) out.push(one);
      }
      return out;
    }
    return this.single(f, v, path);
  }

  /** One value of `f`'s type (an element, for a repeated field or a map). */
  private single(f: protobuf.Field, v: unknown, path: string): unknown {
    const t = f.resolvedType;
    if (t !== null && 'fieldsArray' in t) return this.message(t, v, path);
    if (t !== null) return this.enumValue(t, v, path);
    return this.scalar(f.type, v, path);
  }

  enumValue(e: protobuf.Enum, v: unknown, path: string): string | number | undefined {
    if (typeof v === 'string') {
      if (Object.hasOwn(e.values, v)) return v;
      if (/^-?\d+$/.test(v)) return this.enumValue(e, Number(v), path);
      return this.bad(path, `must be one of ${Object.keys(e.values).join(', ')}, got "${v}"`);
    }
    // A number is passed on: the server refuses one it does not know, naming the field.
    if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) < 2 ** 31) return v;
    return this.bad(path, `must be the name of a ${e.name} value, got ${describe(v)}`);
  }

  scalar(type: string, v: unknown, path: string): unknown {
    switch (type) {
      case 'string':
        return typeof v === 'string' ? v : this.bad(path, `must be a string, got ${describe(v)}`);
      case 'bool':
        return typeof v === 'boolean'
          ? v
          : this.bad(path, `must be true or false, got ${describe(v)}`);
      case 'double':
      case 'float':
        if (typeof v === 'number') return v;
        if (typeof v === 'string' && /^(-?\d+(\.\d+)?([eE][-+]?\d+)?|NaN|-?Infinity)$/.test(v))
          return Number(v);
        return this.bad(path, `must be a number, got ${describe(v)}`);
      case 'bytes':
        return typeof v === 'string' && /^[A-Za-z0-9+/_-]*={0,2}$/.test(v)
          ? Buffer.from(v, 'base64')
          : this.bad(path, `must be base64 text, got ${describe(v)}`);
      default:
        return this.integer(type, v, path);
    }
  }

  private integer(type: string, v: unknown, path: string): number | undefined {
    const range = INT_RANGE[type];
    if (range === undefined) return this.bad(path, `has a type (${type}) JSON cannot carry`);
    const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n))
      return this.bad(path, `must be an integer, got ${describe(v)}`);
    const [min, max] = range;
    if (n < min || n > max) return this.bad(path, `must be in [${min}, ${max}], got ${String(v)}`);
    return n;
  }

  /** A path variable's or query parameter's text as a value of `f` (a scalar or an enum). */
  text(f: protobuf.Field, text: string, path: string): unknown {
    const t = f.resolvedType;
    if (t !== null && 'fieldsArray' in t)
      return this.bad(path, 'is a message: send it in a JSON body, or name its fields');
    if (t !== null) return this.enumValue(t, text, path);
    if (f.type === 'bool') {
      if (text === 'true' || text === 'false') return text === 'true';
      return this.bad(path, `must be true or false, got "${text}"`);
    }
    if (f.type === 'string' || f.type === 'bytes' || f.type === 'double' || f.type === 'float')
      return this.scalar(f.type, text, path);
    return this.integer(f.type, text, path);
  }
}

/** A field path (`spec.tenant`, `jobs[].spec.tenant`) split, with `[]` marking "every element". */
function walk(path: string): { name: string; each: boolean }[] {
  return path.split('.').map((p) => ({ name: p.replace(/\[\]$/, ''), each: p.endsWith('[]') }));
}

function fieldOf(type: protobuf.Type, name: string): protobuf.Field {
  const f = fieldsOf(type).get(name);
  // The route table names fields of the request type (test/unit/http/routes.test.ts).
  if (f === undefined) throw new Error(`${type.name} has no field ${name}`);
  return f;
}

/**
 * Sets `value` (a path variable's text) at `path` in `obj`, whose type is `type`: a message on
 * the way is created when absent; `[]` sets it in every element of a repeated field. A value
 * already there (from the body or the query) must be the same, or empty.
 */
function bindPath(
  r: Reader,
  type: protobuf.Type,
  obj: Msg,
  steps: readonly { name: string; each: boolean }[],
  text: string,
  variable: string,
  at: string,
): void {
  const [step, ...rest] = steps;
  if (step === undefined) return;
  const f = fieldOf(type, step.name);
  const here = at === '' ? snakeCase(f.name) : `${at}.${snakeCase(f.name)}`;
  if (rest.length === 0) {
    const value = r.text(f, text, here);
    if (value === undefined) return;
    const current = obj[f.name];
    if (current === undefined || current === '' || current === value) obj[f.name] = value;
    else
      r.bad(
        here,
        `is ${JSON.stringify(current)} but the path's {${variable}} is ${JSON.stringify(text)}`,
      );
    return;
  }
  const sub = f.resolvedType;
  if (sub === null || !('fieldsArray' in sub))
    throw new Error(`${type.name}.${f.name} is not a message`);
  if (step.each) {
    const items = obj[f.name];
    if (!Array.isArray(items)) return;
    for (const [i, item] of (items as unknown[]).entries())
      if (isObject(item)) bindPath(r, sub, item, rest, text, variable, `${here}[${i}]`);
    return;
  }
  let next = obj[f.name];
  if (!isObject(next)) {
    next = {};
    obj[f.name] = next;
  }
  bindPath(r, sub, next as Msg, rest, text, variable, here);
}

/** Query parameters as fields of `type`: `a.b_c=1` is field `a`'s field `bC`. */
function fromQuery(r: Reader, type: protobuf.Type, query: URLSearchParams): Msg {
  const out: Msg = {};
  const names = [...new Set(query.keys())];
  for (const name of names) {
    const values = query.getAll(name);
    let t = type;
    let obj = out;
    const parts = name.split('.');
    let at = '';
    for (const [i, part] of parts.entries()) {
      const f = fieldsOf(t).get(part) ?? fieldsOf(t).get(camelCase(part));
      if (f === undefined) {
        r.bad(name, `unknown query parameter: ${t.name} has no field ${part}`);
        break;
      }
      at = at === '' ? snakeCase(f.name) : `${at}.${snakeCase(f.name)}`;
      if (i < parts.length - 1) {
        const sub = f.resolvedType;
        if (sub === null || !('fieldsArray' in sub) || f.repeated || f.map) {
          r.bad(name, `${at} has no fields to name`);
          break;
        }
        let next = obj[f.name];
        if (!isObject(next)) {
          next = {};
          obj[f.name] = next;
        }
        obj = next as Msg;
        t = sub;
        continue;
      }
      if (f.map) {
        r.bad(name, 'is a map: send it in a JSON body');
        break;
      }
      if (f.repeated) {
        const items = values.map((v, j) => r.text(f, v, `${at}[${j}]`));
        obj[f.name] = items.filter((v) => v !== undefined);
      } else if (values.length > 1) r.bad(name, `given ${values.length} times; it takes one value`);
      else {
        const v = r.text(f, values[0]!, at);
        if (v !== undefined) obj[f.name] = v;
      }
    }
  }
  return out;
}

/** An HTTP request's parts, read but not interpreted. */
export interface HttpRequestParts {
  readonly params: ReadonlyMap<string, string>;
  readonly query: URLSearchParams;
  /** The parsed JSON body (undefined: none, or a route that reads none). */
  readonly body: unknown;
}

/**
 * The request message of `route`'s RPC, of type `type`, from the HTTP request's parts. Throws a
 * ValidationError (REQUEST_INVALID) naming every bad field.
 */
export function buildRequest(route: HttpRoute, type: protobuf.Type, parts: HttpRequestParts): Msg {
  const r = new Reader();
  let out: Msg;
  if (route.rest === 'body') {
    for (const name of new Set(parts.query.keys()))
      r.bad(name, 'query parameters are not read on this path: send the field in the JSON body');
    out = r.message(type, parts.body ?? {}, '') ?? {};
  } else out = fromQuery(r, type, parts.query);
  for (const [variable, fields] of Object.entries(route.bind)) {
    const text = parts.params.get(variable);
    // The table's variables are its templates' (test/unit/http/routes.test.ts).
    if (text === undefined) throw new Error(`${route.path}: no value for {${variable}}`);
    for (const field of fields) bindPath(r, type, out, walk(field), text, variable, '');
  }
  if (r.violations.length > 0) throw new ValidationError(REQUEST_INVALID, r.violations);
  return out;
}
