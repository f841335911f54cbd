/**
 * The node's operations endpoint (`--metrics-listen`; HTTPS with the client API's certificate
 * when the node has one, `--tls-cert`, else plain HTTP):
 * - `GET /metrics`: Prometheus text exposition;
 * - `GET /healthz`: 200 while the process serves at all (liveness: restart it when this fails);
 * - `GET /readyz`: 200 once the node can do its work, 503 with the reason otherwise (readiness:
 *   send it traffic, or count it in a rollout, only when this passes).
 * Anything else is 404. Kept on its own port so that scrapers never share the gRPC listener.
 * No client certificate is asked for, even when the client API requires them: liveness and
 * readiness probes (a kubelet's, a load balancer's) cannot present one.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { TickraftError } from '../base/errors.js';
import type { TlsSource } from '../transport/tls.js';

export type Readiness =
  { readonly ready: true } | { readonly ready: false; readonly reason: string };

export interface OpsEndpoints {
  render(): Promise<{ contentType: string; body: string }>;
  readiness(): Readiness;
}

export class OpsHttpServer {
  private server: Server | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly endpoints: OpsEndpoints) {}

  /**
   * Listens on host:port (port 0 picks one); resolves with the bound port. With `tls`, serves
   * HTTPS with its certificate and key (a new one from the next handshake on, after a reload).
   */
  start(host: string, port: number, tls?: TlsSource): Promise<number> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => this.handle(req, res);
    let server: Server;
    if (tls === undefined) server = createServer(handler);
    else {
      const identity = (): { cert?: Buffer; key?: Buffer } => ({
        ...(tls.material.cert !== undefined ? { cert: tls.material.cert } : {}),
        ...(tls.material.key !== undefined ? { key: tls.material.key } : {}),
      });
      const https = createHttpsServer(identity(), handler);
      this.unsubscribe = tls.onChange(() => https.setSecureContext(identity()));
      server = https;
    }
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          new TickraftError(
            'OBSERVE_LISTEN_FAILED',
            `cannot serve metrics on ${host}:${port}: ${err.code ?? err.message}`,
          ),
        ),
      );
      server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
    });
  }

  close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (!server) return Promise.resolve();
    // Scrapers keep connections alive; they must not hold the shutdown up.
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      reply(res, 405, 'text/plain', 'only GET\n');
      return;
    }
    switch (path) {
      case '/healthz':
        reply(res, 200, 'text/plain', 'ok\n');
        return;
      case '/readyz': {
        const r = this.endpoints.readiness();
        if (r.ready) reply(res, 200, 'text/plain', 'ready\n');
        else reply(res, 503, 'text/plain', `not ready: ${r.reason}\n`);
        return;
      }
      case '/metrics':
        this.endpoints.render().then(
          ({ contentType, body }) => reply(res, 200, contentType, body),
          (err: unknown) =>
            reply(
              res,
              500,
              'text/plain',
              `metrics failed: ${err instanceof Error ? err.message : String(err)}\n`,
            ),
        );
        return;
      default:
        reply(res, 404, 'text/plain', 'not found: try /metrics, /healthz or /readyz\n');
    }
  }
}

function reply(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
