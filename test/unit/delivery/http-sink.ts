// A real node:http receiver on 127.0.0.1 with an ephemeral port, for the delivery tests: it
// records every request (headers, raw body, which socket carried it) and answers through a
// handler the test supplies, which may also never answer. No mocks: undici talks to it over TCP.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { TargetPolicy } from '../../../src/delivery/target-policy.js';

/**
 * The target policy of pools that send to these sinks: the default refuses loopback, so the
 * tests allow it as a node started with `--allow-target 127.0.0.0/8` does.
 */
export const LOOPBACK_ALLOWED = TargetPolicy.of(['127.0.0.0/8']);

export interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** 1-based number of the TCP connection that carried the request. */
  readonly connection: number;
}

export type SinkHandler = (req: ReceivedRequest, res: ServerResponse) => void;

export interface Sink {
  readonly origin: string;
  readonly received: ReceivedRequest[];
  /** TCP connections accepted so far. */
  connectionCount(): number;
  /** Connections open right now. */
  openConnectionCount(): number;
  close(): Promise<void>;
}

export async function startSink(handler: SinkHandler): Promise<Sink> {
  const received: ReceivedRequest[] = [];
  const sockets = new Map<Socket, number>();
  let accepted = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: ReceivedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        connection: sockets.get(req.socket) ?? 0,
      };
      received.push(r);
      handler(r, res);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.set(socket, ++accepted);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    received,
    connectionCount: () => accepted,
    openConnectionCount: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        // Hanging handlers never end their responses: drop their sockets, then stop listening.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A port that was just free on 127.0.0.1 and is now closed: connecting to it is refused. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls `condition` every 10 ms until it holds or `timeoutMs` passes; never a bare sleep. */
export async function eventually(
  condition: () => boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
