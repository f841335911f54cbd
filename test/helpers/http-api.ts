/**
 * A small client of a cluster's HTTP/JSON API for the tests (Node's fetch): one call with a
 * token or none, the answer's status, headers and JSON; and a path template filled in with
 * percent-encoded values, as docs/HTTP.md tells clients to.
 */
import type { ProcNode } from './cluster.js';

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The body parsed (undefined when it is not JSON). */
  readonly json: Record<string, unknown> | undefined;
}

export interface HttpCall {
  readonly token?: string | undefined;
  /** The Authorization header as it is, instead of `Bearer <token>`. */
  readonly authorization?: string;
  readonly body?: unknown;
  /** The body's exact text, instead of `body`. */
  readonly raw?: string;
  readonly query?: Record<string, string>;
}

export function httpBase(n: ProcNode): string {
  if (n.httpPort === undefined)
    throw new Error(`${n.id} serves no HTTP API (cluster without http)`);
  return `http://${n.host}:${n.httpPort}`;
}

/** A path template (`/v1/tenants/{tenant}/runs/{fire_id}`) with each variable encoded. */
export function fillPath(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{([a-z_]+)\}/g, (_m, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`${template}: no value for {${name}}`);
    return encodeURIComponent(v);
  });
}

export async function httpCall(
  base: string,
  method: string,
  path: string,
  call: HttpCall = {},
): Promise<HttpAnswer> {
  const qs = call.query === undefined ? '' : `?${new URLSearchParams(call.query).toString()}`;
  const headers: Record<string, string> = {};
  if (call.token !== undefined) headers['authorization'] = `Bearer ${call.token}`;
  if (call.authorization !== undefined) headers['authorization'] = call.authorization;
  const body = call.raw ?? (call.body === undefined ? undefined : JSON.stringify(call.body));
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}${qs}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * Reads an NDJSON stream: its status and headers at once, then each line as it comes until
 * `until` says enough (or the stream ends), then aborts it.
 */
export async function readStream(
  url: string,
  token: string | undefined,
  until: (line: Record<string, unknown>, all: Record<string, unknown>[]) => boolean,
  timeoutMs = 15_000,
): Promise<{
  status: number;
  headers: Headers;
  /** From the request to the response's headers. */
  headersAfterMs: number;
  lines: Record<string, unknown>[];
  text: string;
}> {
  const abort = new AbortController();
  const t0 = Date.now();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const res = await fetch(url, {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    signal: abort.signal,
  });
  const headersAfterMs = Date.now() - t0;
  const lines: Record<string, unknown>[] = [];
  let text = '';
  try {
    if (res.status !== 200 || res.body === null) {
      text = await res.text();
      return { status: res.status, headers: res.headers, headersAfterMs, lines, text };
    }
    const decoder = new TextDecoder();
    let pending = '';
    for await (const chunk of res.body) {
      pending += decoder.decode(chunk as Uint8Array, { stream: true });
      let nl: number;
      let enough = false;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = JSON.parse(pending.slice(0, nl)) as Record<string, unknown>;
        pending = pending.slice(nl + 1);
        lines.push(line);
        if (until(line, lines)) enough = true;
      }
      if (enough) break;
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return { status: res.status, headers: res.headers, headersAfterMs, lines, text };
}
