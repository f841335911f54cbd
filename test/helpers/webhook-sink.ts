/**
 * A webhook receiver for the real-process tests: an HTTP server on loopback that records every
 * request (fire id, fencing token, attempt, slot, receipt time, signature check) and behaves as
 * a careful receiver would: it rejects (409) a token of a lower leader term than the highest it
 * has seen for the job, the fencing rule of docs/ARCHITECTURE.md (Words). A test may hold the
 * answers for some fire ids (the leader dies while the request is in flight) or answer them with a
 * status.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { compileSigningKeys, verifyWebhook } from '../../src/delivery/signing.js';
import { termOfToken } from '../../src/scheduler/dispatcher.js';

export interface Receipt {
  /** `<tenant>/<job id>:<slot ms>`. */
  readonly fireId: string;
  /** The job id as its tenant knows it (the body's `jobId`). */
  readonly jobId: string;
  /** The body's `tenant`. */
  readonly tenant: string;
  /** The request's path (and query): which of the sink's targets it was sent to. */
  readonly path: string;
  readonly slotMs: number;
  readonly attempt: number;
  readonly token: number;
  readonly term: number;
  readonly atMs: number;
  readonly signatureOk: boolean;
  /** The status the sink answered (0 while held). */
  status: number;
  readonly body: Record<string, unknown>;
  /** The body's exact bytes as text (what the signature covers). */
  readonly text: string;
  readonly headers: IncomingMessage['headers'];
}

/** Answer 200 at once, hold the answer, answer this status, or answer 200 after a delay. */
export type Behaviour = 'ok' | 'hold' | number | { readonly delayMs: number };

export class WebhookSink {
  readonly receipts: Receipt[] = [];
  /**
   * Highest token term accepted per job, by `<tenant>/<job id>` (job ids are unique per tenant):
   * the fencing state of a careful receiver.
   */
  readonly termOf = new Map<string, number>();
  readonly held: ServerResponse[] = [];
  behaviour: (r: Receipt) => Behaviour = () => 'ok';
  private server: Server | undefined;
  url = '';

  constructor(private readonly secrets: readonly string[]) {}

  async start(host = '127.0.0.1'): Promise<string> {
    const keys = compileSigningKeys(this.secrets);
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const body = JSON.parse(text) as Record<string, unknown>;
        const token = Number(req.headers['tickraft-fencing-token']);
        const fireId = String(req.headers['idempotency-key']);
        const receipt: Receipt = {
          fireId,
          jobId: String(body['jobId']),
          tenant: String(body['tenant']),
          path: req.url ?? '',
          slotMs: Number(body['slotMs']),
          attempt: Number(req.headers['tickraft-attempt']),
          token,
          term: termOfToken(token),
          atMs: Date.now(),
          signatureOk: verifyWebhook(req.headers, text, keys, { nowMs: Date.now() }).ok,
          status: 0,
          body,
          text,
          headers: req.headers,
        };
        this.receipts.push(receipt);
        const fenceKey = `${receipt.tenant}/${receipt.jobId}`;
        const seen = this.termOf.get(fenceKey) ?? 0;
        if (receipt.term < seen) {
          receipt.status = 409;
          res.writeHead(409).end('stale fencing token');
          return;
        }
        this.termOf.set(fenceKey, receipt.term);
        const b = this.behaviour(receipt);
        if (b === 'hold') {
          this.held.push(res);
          return;
        }
        if (typeof b === 'object') {
          setTimeout(() => {
            receipt.status = 200;
            res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
          }, b.delayMs);
          return;
        }
        receipt.status = b === 'ok' ? 200 : b;
        res.writeHead(receipt.status, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    this.server = server;
    const { port } = server.address() as AddressInfo;
    this.url = `http://${host}:${port}`;
    return this.url;
  }

  /** The receipts of a job id (of any tenant, or of `tenant` when given). */
  of(jobId: string, tenant?: string): Receipt[] {
    return this.receipts.filter(
      (r) => r.jobId === jobId && (tenant === undefined || r.tenant === tenant),
    );
  }

  async close(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** A fixed, valid Standard Webhooks secret for tests (24 bytes of 0x2a). */
export const TEST_SECRET = `whsec_${Buffer.alloc(24, 42).toString('base64')}`;
