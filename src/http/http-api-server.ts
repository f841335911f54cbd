/**
 * The HTTP/JSON API of a node (`--http-listen`, docs/HTTP.md): HTTP/1.1, HTTPS with the client
 * API's certificate when the node has one (`--tls-cert`, and client certificates required with
 * `--tls-client-ca`, as on the gRPC port). Each request is matched against the route table
 * (routes.ts), turned into the request message of its RPC (json-request.ts) and sent as a call of
 * the node's own gRPC API (grpc-loopback.ts), whose answer comes back as JSON: the message with
 * the proto's JSON names, enums by name, 64-bit integers as numbers, every field present but the
 * unset `optional` ones. An error is an HTTP status and the body of http-errors.ts.
 *
 * RunService.WatchRuns streams newline-delimited JSON (`application/x-ndjson`), one
 * `{"result": RunEvent}` per line as grpc-gateway writes a server stream, and `{"error": …}` as
 * the last line when the stream fails after it began; a refusal before that is an ordinary error
 * response.
 *
 * `GET /v1/openapi.json` is the OpenAPI document (openapi.json, made by `npm run openapi`), the
 * one path served without a token: it describes the API and holds nothing of the cluster.
 */
import type * as grpc from '@grpc/grpc-js';
import { status as grpcStatus } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type protobuf from 'protobufjs/light.js';
import { parseApiProto } from '../api/client-proto.js';
import { isServiceError } from '../api/status-map.js';
import { TickraftError } from '../base/errors.js';
import type { TlsSource } from '../transport/tls.js';
import { GrpcLoopback } from './grpc-loopback.js';
import { fromLocalError, fromServiceError, HttpApiError, type HttpError } from './http-errors.js';
import { buildRequest, type Msg } from './json-request.js';
import { RouteTable } from './path-template.js';
import { DEFAULT_BODY_LIMIT, OPENAPI_PATH, ROUTES, type HttpRoute } from './routes.js';

/** The checked-in document; at the same depth from src/http/ as from the bundle in dist/server/. */
const OPENAPI_FILE = new URL('../../src/http/openapi.json', import.meta.url);

export interface HttpApiLogger {
  error(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
}

export interface HttpApiOptions {
  /** How the node dials a client API (TLS with its certificate); plaintext when undefined. */
  readonly grpcCredentials: grpc.ChannelCredentials | undefined;
  /** The client API's TLS: HTTPS with it (a reload applies from the next handshake). */
  readonly tls: { readonly source: TlsSource; readonly requireClientCert: boolean } | undefined;
  readonly log: HttpApiLogger;
}

const JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  // Answers may hold secrets shown once (a token, a signing secret): no cache keeps them.
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
} as const;

export class HttpApiServer {
  private server: Server | undefined;
  private unsubscribe: (() => void) | undefined;
  private loopback: GrpcLoopback | undefined;
  private readonly table = new RouteTable(ROUTES);
  private readonly requestTypes = new Map<HttpRoute, { type: protobuf.Type; stream: boolean }>();
  private openapi = '';

  constructor(private readonly options: HttpApiOptions) {
    const root = parseApiProto();
    root.resolveAll();
    for (const route of ROUTES) {
      const method = root.lookupService(`tickraft.v1.${route.service}`).methods[route.rpc];
      if (!method?.resolvedRequestType) throw new Error(`no RPC ${route.service}.${route.rpc}`);
      this.requestTypes.set(route, {
        type: method.resolvedRequestType,
        stream: method.responseStream === true,
      });
    }
  }

  /**
   * Listens on host:port (port 0 picks one) and serves each request as a call of the client API
   * at `grpcAddress` (loopbackAddress() of the node's --listen and bound port); resolves with the
   * bound port. Rejects when the address cannot be bound or the OpenAPI document cannot be read.
   */
  start(host: string, port: number, grpcAddress: string): Promise<number> {
    this.openapi = readFileSync(OPENAPI_FILE, 'utf8');
    this.loopback = new GrpcLoopback(grpcAddress, this.options.grpcCredentials);
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.handle(req, res);
    const tls = this.options.tls;
    let server: Server;
    if (tls === undefined) server = createServer(handler);
    else {
      const context = (): { cert?: Buffer; key?: Buffer; ca?: Buffer } => {
        const m = tls.source.material;
        return {
          ...(m.cert !== undefined ? { cert: m.cert } : {}),
          ...(m.key !== undefined ? { key: m.key } : {}),
          ...(tls.requireClientCert && m.ca !== undefined ? { ca: m.ca } : {}),
        };
      };
      const https = createHttpsServer(
        {
          ...context(),
          requestCert: tls.requireClientCert,
          rejectUnauthorized: tls.requireClientCert,
        },
        handler,
      );
      this.unsubscribe = tls.source.onChange(() => https.setSecureContext(context()));
      server = https;
    }
    this.server = server;
    const bindHost = host.replace(/^\[(.*)\]$/, '$1');
    return new Promise((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          new TickraftError(
            'HTTP_LISTEN_FAILED',
            `cannot serve the HTTP API on ${host}:${port}: ${err.code ?? err.message}`,
          ),
        ),
      );
      server.listen(port, bindHost, () => resolve((server.address() as AddressInfo).port));
    });
  }

  /** Stops listening and ends every open request (watch streams too). */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    this.loopback?.close();
    this.loopback = undefined;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.serve(req, res).catch((err: unknown) => {
      const e = isServiceError(err)
        ? fromServiceError(err)
        : fromLocalError(err, (correlationId, cause) =>
            this.options.log.error(
              { correlationId, err: cause instanceof Error ? cause.stack : String(cause) },
              'HTTP API: internal error',
            ),
          );
      this.replyError(res, e);
    });
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const rawPath = q < 0 ? url : url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    const method = req.method ?? 'GET';
    if (rawPath === OPENAPI_PATH) {
      req.resume();
      if (method !== 'GET')
        throw new HttpApiError(
          405,
          grpcStatus.UNIMPLEMENTED,
          'HTTP_METHOD_NOT_ALLOWED',
          `${method} ${rawPath}: the document is read with GET`,
          { allow: 'GET' },
        );
      res.writeHead(200, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(this.openapi) });
      res.end(this.openapi);
      return;
    }
    const m = this.table.match(method, rawPath);
    if (m.kind === 'not-found') {
      req.resume();
      throw new HttpApiError(
        404,
        grpcStatus.NOT_FOUND,
        'HTTP_NOT_FOUND',
        `no such path: ${rawPath} (GET ${OPENAPI_PATH} lists every path)`,
      );
    }
    if (m.kind === 'method-not-allowed') {
      req.resume();
      throw new HttpApiError(
        405,
        grpcStatus.UNIMPLEMENTED,
        'HTTP_METHOD_NOT_ALLOWED',
        `${method} is not served on ${rawPath}; ${m.allow.join(', ')} is`,
        { allow: m.allow.join(', ') },
      );
    }
    const { route, params } = m;
    let body: unknown;
    if (route.rest === 'body')
      body = await readJsonBody(req, route.maxBodyBytes ?? DEFAULT_BODY_LIMIT);
    else req.resume(); // a body on GET or DELETE is not read, as grpc-gateway does
    const rpc = this.requestTypes.get(route)!;
    const request = buildRequest(route, rpc.type, { params, query, body });
    const authorization = req.headers.authorization;
    const loopback = this.loopback;
    if (loopback === undefined)
      throw new HttpApiError(503, grpcStatus.UNAVAILABLE, 'HTTP_STOPPING', 'the node is stopping');
    if (rpc.stream) {
      this.relayStream(
        loopback.serverStream(route.service, route.rpc, request, authorization),
        res,
      );
      return;
    }
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const answer = await loopback.unary(
      route.service,
      route.rpc,
      request,
      authorization,
      abort.signal,
    );
    const text = JSON.stringify(answer);
    res.writeHead(200, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  /**
   * A server stream as NDJSON. The 200 goes out with the stream's first message or its response
   * headers (the server sends them once the watch is set up); an error before that is an
   * ordinary error response, after it the stream's last line.
   */
  private relayStream(call: grpc.ClientReadableStream<Msg>, res: ServerResponse): void {
    let open = false;
    let done = false;
    const begin = (): void => {
      if (open || done) return;
      open = true;
      res.writeHead(200, {
        'content-type': 'application/x-ndjson; charset=utf-8',
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        // Proxies that buffer responses (nginx) would hold the events back.
        'x-accel-buffering': 'no',
      });
      res.flushHeaders();
    };
    call.on('metadata', begin);
    call.on('data', (m: Msg) => {
      begin();
      if (!res.write(`${JSON.stringify({ result: m })}\n`)) {
        call.pause();
        res.once('drain', () => call.resume());
      }
    });
    call.on('error', (err: grpc.ServiceError) => {
      if (done) return;
      done = true;
      const e = fromServiceError(err);
      if (!open) this.replyError(res, e);
      else res.end(`${JSON.stringify({ error: e.body })}\n`);
    });
    call.on('status', (s: grpc.StatusObject) => {
      if (s.code !== grpcStatus.OK || done) return;
      begin();
      done = true;
      res.end();
    });
    res.on('close', () => {
      if (done) return;
      done = true;
      call.cancel();
    });
  }

  private replyError(res: ServerResponse, e: HttpError): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = JSON.stringify(e.body);
    res.writeHead(e.httpStatus, {
      ...JSON_HEADERS,
      ...e.headers,
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }
}

/**
 * The request's body as JSON (undefined when empty), at most `limit` bytes: a larger one is 413
 * and the connection is closed rather than read to its end. The Content-Type is not checked, so
 * `curl -d '{…}'` works as it is.
 */
async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const tooLarge = (): HttpApiError =>
    new HttpApiError(
      413,
      grpcStatus.RESOURCE_EXHAUSTED,
      'HTTP_BODY_TOO_LARGE',
      `the request body is larger than ${limit} bytes, the most this path takes`,
      { connection: 'close' },
    );
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) throw tooLarge();
  const bytes = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    // Past the limit the rest is read and dropped rather than the stream destroyed, which would
    // take the socket, and the 413, with it; the answer closes the connection.
    req.on('data', (b: Buffer) => {
      size += b.length;
      if (size <= limit) chunks.push(b);
      else if (!over) {
        over = true;
        chunks.length = 0;
        reject(tooLarge());
      }
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
  if (bytes.length === 0) return undefined;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new HttpApiError(
      400,
      grpcStatus.INVALID_ARGUMENT,
      'HTTP_BODY_INVALID',
      'the request body is not UTF-8 text',
    );
  }
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new HttpApiError(
      400,
      grpcStatus.INVALID_ARGUMENT,
      'HTTP_BODY_INVALID',
      `the request body is not JSON: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}
