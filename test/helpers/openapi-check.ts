/**
 * What the HTTP API tests need of the OpenAPI document (src/http/openapi.json): its operations,
 * and a check of a JSON value against one of its schemas (the subset of JSON Schema the document
 * uses: $ref, type, enum, properties, additionalProperties, items, anyOf, oneOf, required,
 * minimum, maximum), so that a test can say an answer is what the document says.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

type Json = Record<string, unknown>;

export interface Operation {
  readonly path: string;
  readonly method: string;
  readonly operationId: string;
  readonly op: Json;
}

export class OpenApiDoc {
  constructor(readonly doc: Json) {}

  static load(): OpenApiDoc {
    const file = fileURLToPath(new URL('../../src/http/openapi.json', import.meta.url));
    return new OpenApiDoc(JSON.parse(readFileSync(file, 'utf8')) as Json);
  }

  operations(): Operation[] {
    const paths = this.doc['paths'] as Record<string, Record<string, Json>>;
    return Object.entries(paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({
        path,
        method: method.toUpperCase(),
        operationId: String(op['operationId']),
        op,
      })),
    );
  }

  /** The statuses an operation documents, and the schema of each one's body. */
  responses(op: Operation): Map<number, Json | undefined> {
    const out = new Map<number, Json | undefined>();
    for (const [status, r] of Object.entries(op.op['responses'] as Record<string, Json>)) {
      const resolved = this.resolve(r);
      const content = resolved['content'] as Record<string, { schema: Json }> | undefined;
      const first = content === undefined ? undefined : Object.values(content)[0]?.schema;
      out.set(Number(status), first);
    }
    return out;
  }

  private resolve(x: Json): Json {
    const ref = x['$ref'];
    if (typeof ref !== 'string') return x;
    let at: unknown = this.doc;
    for (const part of ref.replace(/^#\//, '').split('/')) at = (at as Json)[part];
    if (at === undefined) throw new Error(`unresolved ${ref}`);
    return this.resolve(at as Json);
  }

  schema(name: string): Json {
    return this.resolve({ $ref: `#/components/schemas/${name}` });
  }

  /** Every way `value` differs from `schema`, as `$.path: reason`; [] when it conforms. */
  check(schema: Json, value: unknown, at = '$'): string[] {
    const s = this.resolve(schema);
    const errors: string[] = [];
    if (Array.isArray(s['anyOf']) || Array.isArray(s['oneOf'])) {
      const options = (s['anyOf'] ?? s['oneOf']) as Json[];
      const fits = options.filter((o) => this.check(o, value, at).length === 0).length;
      if (s['oneOf'] !== undefined ? fits !== 1 : fits === 0)
        errors.push(`${at}: fits ${fits} of ${options.length} alternatives`);
      return errors;
    }
    const type = s['type'];
    if (type !== undefined) {
      const types = Array.isArray(type) ? (type as string[]) : [type as string];
      if (!types.some((tp) => typeOk(tp, value)))
        return [`${at}: ${JSON.stringify(value)?.slice(0, 80)} is not ${types.join('|')}`];
    }
    if (Array.isArray(s['enum']) && !(s['enum'] as unknown[]).includes(value))
      errors.push(`${at}: ${JSON.stringify(value)} is not one of the enum`);
    if (typeof value === 'number') {
      if (typeof s['minimum'] === 'number' && value < s['minimum']) errors.push(`${at}: below min`);
      if (typeof s['maximum'] === 'number' && value > s['maximum']) errors.push(`${at}: above max`);
    }
    if (Array.isArray(value) && s['items'] !== undefined)
      value.forEach((v, i) => errors.push(...this.check(s['items'] as Json, v, `${at}[${i}]`)));
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const obj = value as Json;
      const props = (s['properties'] ?? {}) as Record<string, Json>;
      for (const r of (s['required'] ?? []) as string[])
        if (!(r in obj)) errors.push(`${at}: ${r} is required`);
      for (const [k, v] of Object.entries(obj)) {
        const p = props[k];
        if (p !== undefined) errors.push(...this.check(p, v, `${at}.${k}`));
        else if (s['additionalProperties'] === false) errors.push(`${at}: ${k} is not documented`);
        else if (typeof s['additionalProperties'] === 'object')
          errors.push(...this.check(s['additionalProperties'] as Json, v, `${at}.${k}`));
      }
    }
    return errors;
  }
}

function typeOk(type: string, v: unknown): boolean {
  switch (type) {
    case 'null':
      return v === null;
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'number':
      return typeof v === 'number';
    case 'array':
      return Array.isArray(v);
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
    default:
      return typeof v === type;
  }
}
