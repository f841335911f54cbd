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
 * Fencing rule `term` (the rule of test/helpers/webhook-sink.ts; docs/ARCHITECTURE.md, Words),
 * per job: a token of an older leader term than the newest term accepted is refused with 409
 * (`stale`), and so is a token already accepted (every attempt has its own token). Two runs of one
 * term may arrive in either order, which the `token` rule would refuse though nothing is wrong.
 *
 * Answers, drawn per request from the seed: `5xx` (503 at once), `slow` (held `--slow-ms` ± 50 %,
 * then 200; the sender may have given up first), otherwise `2xx` (200 at once).
 */
import { Command } from 'commander';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { compileSigningKeys, verifyWebhook } from '../src/delivery/signing.js';
import { addReceiverOptions, Receiver, type ReceiverFlags } from './receiver.js';

interface Flags extends ReceiverFlags {
  readonly secret: string;
  readonly listen: string;
}

/** What the sink answers besides the status the verdict carries. */
const SINK_BODIES = { stale: 'stale fencing token', '5xx': 'chaos: seeded error', '2xx': 'ok' };

function fail(message: string): never {
  process.stderr.write(`chaos sink: ${message}\n`);
  process.exit(2);
}

function listenAddress(text: string): [string, number] {
  const [host, portText] = text.split(/:(?=\d+$)/);
  if (host === undefined || portText === undefined) fail('--listen must be HOST:PORT');
  return [host, Number(portText)];
}

function run(flags: Flags): void {
  const receiver = new Receiver(flags, fail);
  const [host, port] = listenAddress(flags.listen);
  const keys = compileSigningKeys([flags.secret]);

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = receiver.now();
      const text = Buffer.concat(chunks).toString('utf8');
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(text) as Record<string, unknown>;
      } catch {
        res.writeHead(400).end('body is not JSON');
        return;
      }
      const verdict = receiver.receive(
        {
          fireId: String(req.headers['idempotency-key']),
          jobId: String(body['jobId']),
          slotMs: Number(body['slotMs']),
          attempt: Number(req.headers['tickraft-attempt']),
          token: Number(req.headers['tickraft-fencing-token']),
          signatureOk: verifyWebhook(req.headers, text, keys, { nowMs: Date.now() }).ok,
        },
        t,
      );
      const plain = { 'content-type': 'text/plain' };
      if (verdict.answer === 'slow') {
        // The sender may give up during the hold; the record already says what was drawn.
        setTimeout(() => {
          if (!res.destroyed) res.writeHead(verdict.status, plain).end('ok (slow)');
        }, verdict.heldMs);
        return;
      }
      res.writeHead(verdict.status, plain).end(SINK_BODIES[verdict.answer]);
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
      receiver.close();
      process.exit(0);
    });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

addReceiverOptions(
  new Command()
    .name('chaos-sink')
    .description(
      'Webhook sink of a chaos run: records every delivery, fences by term, misbehaves on purpose.',
    ),
  'requests held before a 200',
  'requests answered 503',
)
  .requiredOption('--secret <whsec>', "the tenants' signing secret, to check signatures")
  .option('--listen <host:port>', 'address to listen on (port 0: a free port)', '127.0.0.1:0')
  .action(run)
  .parse();
