/**
 * Toxic definitions as the API sees them: parsing the create and update bodies with Toxiproxy's
 * defaults and error texts, and the JSON shape of a toxic. A toxic's name, type and stream never
 * change; an update merges attributes into the current ones and keeps toxicity when absent.
 */
import { badRequest } from './errors.js';
import { toxicKind } from './toxics/kinds.js';
import type { Attributes } from './toxics/stage.js';

export type Direction = 'upstream' | 'downstream';

export interface ToxicSpec {
  readonly name: string;
  readonly type: string;
  /** The stream as the client spelled it (echoed back), parsed case-insensitively. */
  readonly stream: string;
  readonly direction: Direction;
  readonly toxicity: number;
  readonly attributes: Attributes;
}

export interface ToxicJson {
  name: string;
  type: string;
  stream: string;
  toxicity: number;
  attributes: Attributes;
}

export function toToxicJson(t: ToxicSpec): ToxicJson {
  return {
    name: t.name,
    type: t.type,
    stream: t.stream,
    toxicity: t.toxicity,
    attributes: { ...t.attributes },
  };
}

type Body = Record<string, unknown>;

function asObject(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('bad request body: the body must be a JSON object');
  }
  return body as Body;
}

function optionalString(body: Body, field: string): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw badRequest(`bad request body: ${field} must be a string`);
  return v;
}

function optionalToxicity(body: Body): number | undefined {
  const v = body['toxicity'];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw badRequest('bad request body: toxicity must be a number');
  }
  return v;
}

/** Attributes of `type` from `raw`, over `base`; unknown keys are ignored, as in Toxiproxy. */
function parseAttributes(type: string, raw: unknown, base: Attributes | undefined): Attributes {
  const names = toxicKind(type)?.attributeNames ?? [];
  const out: Record<string, number> = {};
  for (const n of names) out[n] = base?.[n] ?? 0;
  if (raw === undefined || raw === null) return out;
  const obj = asObject(raw);
  for (const n of names) {
    const v = obj[n];
    if (v === undefined || v === null) continue;
    // Go decodes these into int64 fields: a fraction or a string is a decode error.
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      throw badRequest(
        `bad request body: attributes.${n} must be an integer, got ${JSON.stringify(v)}`,
      );
    }
    out[n] = v;
  }
  return out;
}

function parseDirection(stream: string): Direction | undefined {
  const lower = stream.toLowerCase();
  return lower === 'upstream' || lower === 'downstream' ? lower : undefined;
}

/** POST /proxies/{p}/toxics: only `type` is needed; name defaults to `<type>_<stream>`. */
export function parseToxicCreate(body: unknown): ToxicSpec {
  const b = asObject(body);
  const stream = optionalString(b, 'stream') ?? 'downstream';
  const direction = parseDirection(stream);
  if (direction === undefined) {
    throw badRequest('stream was invalid, can be either upstream or downstream');
  }
  const type = optionalString(b, 'type') ?? '';
  if (toxicKind(type) === undefined) throw badRequest('invalid toxic type');
  const name = optionalString(b, 'name') || `${type}_${stream}`;
  return {
    name,
    type,
    stream,
    direction,
    toxicity: optionalToxicity(b) ?? 1,
    attributes: parseAttributes(type, b['attributes'], undefined),
  };
}

/** POST/PATCH /proxies/{p}/toxics/{t}: attributes merge, toxicity is kept when absent. */
export function parseToxicUpdate(current: ToxicSpec, body: unknown): ToxicSpec {
  const b = asObject(body);
  return {
    ...current,
    toxicity: optionalToxicity(b) ?? current.toxicity,
    attributes: parseAttributes(current.type, b['attributes'], current.attributes),
  };
}
