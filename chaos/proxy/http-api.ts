/**
 * The Toxiproxy HTTP API (2.x) over a ProxyRegistry: routes, verbs, status codes and bodies as
 * Toxiproxy's api.go writes them, because clients only look at the status and the JSON.
 *
 * - Success bodies are JSON; creates answer 201 (proxies, populate) or 200 (toxics); deletes and
 *   reset answer 204 with no body.
 * - Errors are `{"error": "...", "status": N}` plus a newline, sent as text/plain like Go's
 *   http.Error. An unknown path is a plain 404, a known path with another verb a bare 405.
 * - A browser (User-Agent starting with Mozilla/) gets 403, as Toxiproxy's CSRF guard does.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { badRequest, ProxyApiError } from './errors.js';
import { PopulateError, type ProxyRegistry } from './registry.js';
import { toToxicJson } from './toxic.js';

/** The Toxiproxy release whose API this server follows. */
export const COMPATIBLE_VERSION = '2.12.0';
const BODY_BYTES_MAX = 1024 * 1024;

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
interface Reply {
  readonly status: number;
  readonly body?: unknown;
}
type Handler = (params: string[], body: () => Promise<unknown>) => Promise<Reply> | Reply;
interface Route {
  readonly pattern: RegExp;
  readonly methods: Partial<Record<Method, Handler>>;
}

const NAME = '([^/]+)';

function routes(registry: ProxyRegistry): Route[] {
  const r = registry;
  const ok = (body: unknown): Reply => ({ status: 200, body });
  const noContent: Reply = { status: 204 };
  const updateProxy: Handler = async ([p], body) => {
    const b = await body();
    return r.serialize(async () => {
      const proxy = r.get(p!);
      await proxy.update(b);
      return ok(proxy.toJSON());
    });
  };
  const updateToxic: Handler = async ([p, t], body) => {
    const b = await body();
    return r.serialize(() => ok(toToxicJson(r.get(p!).updateToxic(t!, b))));
  };
  const deleteToxic: Handler = ([p, t]) =>
    r.serialize(() => {
      r.get(p!).removeToxic(t!);
      return noContent;
    });
  return [
    {
      pattern: /^\/proxies$/,
      methods: {
        GET: () => ok(r.list()),
        POST: async (_, body) => {
          const b = await body();
          return r.serialize(async () => ({ status: 201, body: (await r.create(b)).toJSON() }));
        },
      },
    },
    {
      pattern: /^\/populate$/,
      methods: {
        POST: async (_, body) => {
          const b = await body();
          const proxies = await r.serialize(() => r.populate(b));
          return { status: 201, body: { proxies: proxies.length > 0 ? proxies : null } };
        },
      },
    },
    {
      pattern: /^\/reset$/,
      methods: { POST: () => r.serialize(async () => (await r.reset(), noContent)) },
    },
    { pattern: /^\/version$/, methods: { GET: () => ({ status: 200, body: VERSION }) } },
    {
      pattern: new RegExp(`^/proxies/${NAME}$`),
      methods: {
        GET: ([p]) => ok(r.get(p!).toJSON()),
        POST: updateProxy,
        PATCH: updateProxy,
        DELETE: ([p]) => r.serialize(async () => (await r.remove(p!), noContent)),
      },
    },
    {
      pattern: new RegExp(`^/proxies/${NAME}/toxics$`),
      methods: {
        GET: ([p]) => ok(r.get(p!).listToxics()),
        POST: async ([p], body) => {
          const b = await body();
          return r.serialize(() => ok(toToxicJson(r.get(p!).addToxic(b))));
        },
      },
    },
    {
      pattern: new RegExp(`^/proxies/${NAME}/toxics/${NAME}$`),
      methods: {
        GET: ([p, t]) => ok(toToxicJson(r.get(p!).getToxic(t!))),
        POST: updateToxic,
        PATCH: updateToxic,
        DELETE: deleteToxic,
      },
    },
  ];
}

/** /version is written as text by Toxiproxy, with this exact spacing and a newline. */
const VERSION = Symbol('version');

export function createApiServer(registry: ProxyRegistry): Server {
  const table = routes(registry);
  return createServer((req, res) => {
    handle(table, req, res).catch((err: unknown) => sendError(res, err));
  });
}

async function handle(table: Route[], req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.setHeader('X-Toxiproxy-Request-Id', randomUUID());
  if ((req.headers['user-agent'] ?? '').startsWith('Mozilla/')) {
    sendText(res, 403, 'User agent not allowed\n');
    return;
  }
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  for (const route of table) {
    const m = route.pattern.exec(path);
    if (!m) continue;
    const handler = route.methods[req.method as Method];
    if (handler === undefined) {
      res.writeHead(405).end();
      return;
    }
    const params = m.slice(1).map((s) => decodeURIComponent(s));
    const reply = await handler(params, () => readJson(req));
    sendReply(res, reply);
    return;
  }
  sendText(res, 404, '404 page not found\n');
}

function sendReply(res: ServerResponse, reply: Reply): void {
  if (reply.body === undefined) {
    res.writeHead(reply.status).end();
  } else if (reply.body === VERSION) {
    res.writeHead(reply.status, { 'Content-Type': 'application/json;charset=utf-8' });
    res.end(`{"version": "${COMPATIBLE_VERSION}"}\n`);
  } else {
    res.writeHead(reply.status, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(reply.body));
  }
}

function sendError(res: ServerResponse, err: unknown): void {
  const status = err instanceof ProxyApiError ? err.status : 500;
  const message = err instanceof Error ? err.message : String(err);
  const body: Record<string, unknown> = { error: message, status };
  if (err instanceof PopulateError) body['proxies'] = err.proxies.length > 0 ? err.proxies : null;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.setHeader('X-Content-Type-Options', 'nosniff');
  sendText(res, status, `${JSON.stringify(body)}\n`);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(text);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req as AsyncIterable<Buffer>) {
    size += part.length;
    if (size > BODY_BYTES_MAX)
      throw badRequest(`bad request body: larger than ${BODY_BYTES_MAX} bytes`);
    parts.push(part);
  }
  const text = Buffer.concat(parts).toString('utf8');
  // Go's decoder reports an empty body as EOF.
  if (text.trim() === '') throw badRequest('bad request body: EOF');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw badRequest(`bad request body: ${err instanceof Error ? err.message : String(err)}`);
  }
}
