/**
 * The chaos run's webhook sink, a process of its own that is never behind a proxy and never
 * preloaded with libfaketime: it is part of the true timeline. It records every request it
 * receives as a DeliveryRecord (chaos/history/format.ts) in its own history file, fences like a
 * careful receiver, and misbehaves on purpose for a seeded fraction of requests.
 *
 *   tsx chaos/sink.ts --history FILE --started-at EPOCH_MS --secret whsec_… [--seed N]
 *     [--listen HOST:PORT] [--slow-fraction F] [--error-fraction F] [--slow-ms N]
 *
 * Prints `listening on http://HOST:PORT` once it accepts requests; SIGTERM closes it (exit 0).
 *
 * Fencing rule `term` (the rule of test/helpers/webhook-sink.ts and DESIGN §1), per job: a token
 * of an older leader term than the newest term accepted is refused with 409 (`stale`), and so is
 * a token already accepted (every attempt has its own token). Two runs of one term may arrive in
 * either order, which the `token` rule would refuse though nothing is wrong.
 *
 * Answers, drawn per request from the seed: `5xx` (503 at once), `slow` (held `--slow-ms` ± 50 %,
 * then 200; the sender may have given up first), otherwise `2xx` (200 at once).
 */
import { Command } from 'commander';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { SeededRand } from '../src/base/rand.js';
import { compileSigningKeys, verifyWebhook } from '../src/delivery/signing.js';
import type { DeliveryRecord, SinkAnswer } from './history/format.js';
import { HistoryWriter } from './history/jsonl.js';
import { TermFence } from './term-fence.js';

interface Flags {
  readonly history: string;
  readonly startedAt: string;
  readonly secret: string;
  readonly seed: string;
  readonly listen: string;
  readonly slowFraction: string;
  readonly errorFraction: string;
  readonly slowMs: string;
}

function fail(message: string): never {
  process.stderr.write(`chaos sink: ${message}\n`);
  process.exit(2);
}

function fraction(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0 || n > 1) fail(`${flag} must be in [0, 1], got '${text}'`);
  return n;
}

function listenAddress(text: string): [string, number] {
  const [host, portText] = text.split(/:(?=\d+$)/);
  if (host === undefined || portText === undefined) fail('--listen must be HOST:PORT');
  return [host, Number(portText)];
}

function run(flags: Flags): void {
  const startedAt = Number(flags.startedAt);
  if (!Number.isFinite(startedAt) || startedAt <= 0) fail('--started-at must be epoch ms');
  const slowFraction = fraction(flags.slowFraction, '--slow-fraction');
  const errorFraction = fraction(flags.errorFraction, '--error-fraction');
  const slowMs = Number(flags.slowMs);
  if (!Number.isSafeInteger(slowMs) || slowMs < 0) fail('--slow-ms must be a whole number ≥ 0');
  const [host, port] = listenAddress(flags.listen);
  const keys = compileSigningKeys([flags.secret]);
  const rand = new SeededRand(Number(flags.seed) >>> 0);
  const history = new HistoryWriter(flags.history);
  const fence = new TermFence();
  const now = (): number => performance.timeOrigin + performance.now() - startedAt;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = now();
      const text = Buffer.concat(chunks).toString('utf8');
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        res.writeHead(400).end('body is not JSON');
        return;
      }
      const token = Number(req.headers['tickraft-fencing-token']);
      const jobId = String(body['jobId']);
      const base = {
        type: 'delivery' as const,
        t,
        fireId: String(req.headers['idempotency-key']),
        jobId,
        slotMs: Number(body['slotMs']),
        attempt: Number(req.headers['tickraft-attempt']),
        token,
        signatureOk: verifyWebhook(req.headers, text, keys, { nowMs: Date.now() }).ok,
      };
      const record = (answer: SinkAnswer, status: number, heldMs?: number): void => {
        const r: DeliveryRecord =
          heldMs === undefined ? { ...base, answer, status } : { ...base, answer, status, heldMs };
        history.append(r);
      };
      if (!fence.admit(jobId, token)) {
        // Recorded before answering: a crash after the answer must not lose the receipt.
        record('stale', 409);
        res.writeHead(409, { 'content-type': 'text/plain' }).end('stale fencing token');
        return;
      }
      const draw = rand.float();
      if (draw < errorFraction) {
        record('5xx', 503);
        res.writeHead(503, { 'content-type': 'text/plain' }).end('chaos: seeded error');
        return;
      }
      if (draw < errorFraction + slowFraction) {
        const heldMs = Math.round(slowMs * (0.5 + rand.float()));
        // The receipt time is when the body was complete; the record is written at once, with
        // the hold it will get, so a sink killed during the hold still has it.
        record('slow', 200, heldMs);
        setTimeout(() => {
          if (!res.destroyed) res.writeHead(200, { 'content-type': 'text/plain' }).end('ok (slow)');
        }, heldMs);
        return;
      }
      record('2xx', 200);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('error', (err) => fail(err.message));
  server.listen(port, host, () => {
    const { address, port } = server.address() as AddressInfo;
    process.stdout.write(`listening on http://${address}:${port}\n`);
  });
  const stop = (): void => {
    server.closeAllConnections();
    server.close(() => {
      history.close();
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

new Command()
  .name('chaos-sink')
  .description(
    'Webhook sink of a chaos run: records every delivery, fences by term, misbehaves on purpose.',
  )
  .requiredOption('--history <file>', 'history file (JSON lines) to append delivery records to')
  .requiredOption('--started-at <epochMs>', "the run's meta.startedAtEpochMs (time base of `t`)")
  .requiredOption('--secret <whsec>', "the tenants' signing secret, to check signatures")
  .option('--seed <n>', 'seed of the answer draws', '1')
  .option('--listen <host:port>', 'address to listen on (port 0: a free port)', '127.0.0.1:0')
  .option('--slow-fraction <f>', 'fraction of requests held before a 200', '0.02')
  .option('--error-fraction <f>', 'fraction of requests answered 503', '0.03')
  .option('--slow-ms <n>', 'mean hold of a slow answer, ms', '1500')
  .action(run)
  .parse();
