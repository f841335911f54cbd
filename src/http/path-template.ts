/**
 * Path templates of the route table (routes.ts) and how a request's path is matched against
 * them. A variable is one whole segment, percent-decoded after the path is split at `/`, so a
 * value holding `/` is sent as `%2F`: a fire id `acme/nightly:1751333400000` is the segment
 * `acme%2Fnightly%3A1751333400000` (encodeURIComponent). A custom verb is split off the raw last
 * segment before decoding, so an encoded `%3A` never reads as one; an unencoded `:` in a variable
 * is kept (`acme%2Fnightly:1751333400000` also names that run on a path without a verb).
 */
import { TickraftError } from '../base/errors.js';
import type { HttpMethod, HttpRoute } from './routes.js';

type Segment = { readonly literal: string } | { readonly variable: string };

export interface CompiledTemplate {
  readonly segments: readonly Segment[];
  /** The custom verb after the last segment (`pause` in `…/{job}:pause`), or undefined. */
  readonly verb: string | undefined;
  /** The variables' names, in path order. */
  readonly variables: readonly string[];
}

const VARIABLE = /^\{([a-z_]+)\}$/;
const LITERAL = /^[A-Za-z0-9._-]+$/;

/** Parses a template of the route table; a malformed one is a bug of the table (throws). */
export function compileTemplate(path: string): CompiledTemplate {
  if (!path.startsWith('/')) throw new Error(`template ${path} must start with /`);
  const parts = path.slice(1).split('/');
  let verb: string | undefined;
  const last = parts[parts.length - 1]!;
  const colon = last.lastIndexOf(':');
  if (colon >= 0) {
    verb = last.slice(colon + 1);
    parts[parts.length - 1] = last.slice(0, colon);
    if (!/^[A-Za-z]+$/.test(verb)) throw new Error(`template ${path}: bad verb ${verb}`);
  }
  const segments = parts.map((p): Segment => {
    const v = VARIABLE.exec(p);
    if (v) return { variable: v[1]! };
    if (!LITERAL.test(p)) throw new Error(`template ${path}: bad segment ${p}`);
    return { literal: p };
  });
  const variables = segments.flatMap((s) => ('variable' in s ? [s.variable] : []));
  if (new Set(variables).size !== variables.length)
    throw new Error(`template ${path}: a variable appears twice`);
  return { segments, verb, variables };
}

/** A path segment that is not valid percent-encoding (HTTP 400). */
export class PathEncodingError extends TickraftError {
  override readonly name = 'PathEncodingError';
}

/**
 * Matches the raw (still percent-encoded) path, without its query, against `t`: the decoded
 * variables, or undefined when it does not match. Throws PathEncodingError for a variable that
 * does not decode.
 */
export function matchTemplate(
  t: CompiledTemplate,
  rawPath: string,
): Map<string, string> | undefined {
  if (!rawPath.startsWith('/')) return undefined;
  const raw = rawPath.slice(1).split('/');
  if (raw.length !== t.segments.length) return undefined;
  if (t.verb !== undefined) {
    const suffix = `:${t.verb}`;
    const last = raw[raw.length - 1]!;
    if (!last.endsWith(suffix)) return undefined;
    raw[raw.length - 1] = last.slice(0, -suffix.length);
  }
  const values = new Map<string, string>();
  for (const [i, seg] of t.segments.entries()) {
    const text = raw[i]!;
    if ('literal' in seg) {
      if (text !== seg.literal) return undefined;
      continue;
    }
    if (text === '') return undefined;
    let decoded: string;
    try {
      decoded = decodeURIComponent(text);
    } catch {
      throw new PathEncodingError(
        'HTTP_PATH_INVALID',
        `path segment {${seg.variable}} is not valid percent-encoding: ${text}`,
      );
    }
    values.set(seg.variable, decoded);
  }
  return values;
}

export interface CompiledRoute {
  readonly route: HttpRoute;
  readonly template: CompiledTemplate;
}

export type RouteMatch =
  | { readonly kind: 'found'; readonly route: HttpRoute; readonly params: Map<string, string> }
  /** Some route has this path, none with this method: 405 with these in `Allow`. */
  | { readonly kind: 'method-not-allowed'; readonly allow: readonly HttpMethod[] }
  | { readonly kind: 'not-found' };

/** The route table compiled once, and the lookup of a request's method and raw path. */
export class RouteTable {
  private readonly compiled: readonly CompiledRoute[];

  constructor(routes: readonly HttpRoute[]) {
    this.compiled = routes.map((route) => ({ route, template: compileTemplate(route.path) }));
  }

  match(method: string, rawPath: string): RouteMatch {
    let hits: { c: CompiledRoute; params: Map<string, string> }[] = [];
    for (const c of this.compiled) {
      const params = matchTemplate(c.template, rawPath);
      if (params) hits.push({ c, params });
    }
    // `…/jobs/x:pause` also fits `…/jobs/{job}` with the job "x:pause": the verb reading wins,
    // as in grpc-gateway, so a verb sent with the wrong method is 405, not a lookup of "x:pause".
    if (hits.some((h) => h.c.template.verb !== undefined))
      hits = hits.filter((h) => h.c.template.verb !== undefined);
    if (hits.length === 0) return { kind: 'not-found' };
    const hit = hits.find((h) => h.c.route.method === method);
    if (hit) return { kind: 'found', route: hit.c.route, params: hit.params };
    return { kind: 'method-not-allowed', allow: [...new Set(hits.map((h) => h.c.route.method))] };
  }
}
