// The connect-time target check (src/delivery/guarded-connect.ts) through the real stack:
// deliverWebhook → OriginPools → undici Pool → the guarded connector → a node:http sink on
// 127.0.0.1. Goal: a made-up name that resolves to a forbidden address (here: the sink's own
// 127.0.0.1) is refused before any connection, so the request never arrives, and the attempt
// ends at once as a final, provably undelivered TARGET_FORBIDDEN failure (never a retry); the
// same holds for a literal address that skipped the create-time check, for a name re-bound to a
// forbidden address after an allowed one, and for a name with one forbidden address among
// allowed ones. With the range allowed, the same name reaches the sink through the address the
// check saw (it exists in no DNS, so nothing resolved it a second time); a resolver failure
// stays a DNS failure; https keeps the name as SNI servername. Method: the pools' resolver is
// the test's function (no DNS), every socket stays on 127.0.0.0/8.
import { createServer as createTlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { compileSigningKeys } from '../../../src/delivery/signing.js';
import { deliverWebhook, type WebhookAttempt } from '../../../src/delivery/webhook.js';
import { OriginPools } from '../../../src/delivery/origin-pools.js';
import { TargetPolicy } from '../../../src/delivery/target-policy.js';
import type { ResolveAll } from '../../../src/delivery/guarded-connect.js';
import { startSink, type Sink } from './http-sink.js';

const NAME = 'sink.rebind.test';
const SECRET = `whsec_${Buffer.alloc(24, 9).toString('base64')}`;

function attemptFor(url: string): WebhookAttempt {
  return {
    job: {
      id: 'acme/j',
      tenant: 'acme',
      target: { url, headers: {} },
      payload: '{}',
      attemptDeadlineMs: 5000,
    },
    fireId: 'acme/j:1000',
    slotMs: 1000,
    attempt: 1,
    token: 1,
    signing: compileSigningKeys([SECRET]),
    nowMs: Date.now(),
  };
}

/** A resolver answering `addresses()` for NAME (read at each call) and ENOTFOUND for others. */
function resolverOf(addresses: () => string[]): { resolve: ResolveAll; calls: string[] } {
  const calls: string[] = [];
  const resolve: ResolveAll = (hostname) => {
    calls.push(hostname);
    if (hostname !== NAME) {
      const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
      err.code = 'ENOTFOUND';
      return Promise.reject(err);
    }
    return Promise.resolve(addresses().map((address) => ({ address, family: 4 })));
  };
  return { resolve, calls };
}

async function setUp(
  t: Test,
  policy: TargetPolicy,
  addresses: () => string[],
  connection: 'keep-alive' | 'close' = 'keep-alive',
): Promise<{ sink: Sink; pools: OriginPools; calls: string[]; url: string }> {
  const sink = await startSink((_req, res) => {
    res.writeHead(200, { connection });
    res.end('ok');
  });
  const { resolve, calls } = resolverOf(addresses);
  const pools = new OriginPools({ targetPolicy: policy, resolve });
  t.teardown(async () => {
    await pools.destroy();
    await sink.close();
  });
  const port = new URL(sink.origin).port;
  return { sink, pools, calls, url: `http://${NAME}:${port}/hook` };
}

t.test(
  'a name resolving to loopback is refused at connect: nothing arrives, no retry',
  async (t) => {
    const { sink, pools, calls, url } = await setUp(t, TargetPolicy.STRICT, () => ['127.0.0.1']);
    const report = await deliverWebhook(attemptFor(url), { pools });
    t.match(report, {
      outcome: 'fail',
      code: 'TARGET_FORBIDDEN',
      isProvablyUndelivered: true,
      responseExcerpt: '',
    });
    t.notOk('statusCode' in report, 'no answer: nothing was sent');
    t.match(
      report.error,
      /^TARGET_FORBIDDEN: sink\.rebind\.test resolved to a loopback address 127\.0\.0\.1, which webhooks may not reach; a node started with --allow-target covering it may$/,
    );
    t.same(calls, [NAME], 'the name was resolved once, by the guarded lookup');
    t.equal(sink.connectionCount(), 0, 'no connection reached the sink');
    t.equal(sink.received.length, 0, 'the request never arrived');
    // A second attempt (a replay, say) is refused the same way and reaches nothing either.
    const again = await deliverWebhook(attemptFor(url), { pools });
    t.equal(again.code, 'TARGET_FORBIDDEN');
    t.equal(sink.received.length, 0);
  },
);

t.test(
  'with the range allowed, the same name reaches the sink at the checked address',
  async (t) => {
    const allowed = TargetPolicy.of(['127.0.0.0/8']);
    const { sink, pools, calls, url } = await setUp(t, allowed, () => ['127.0.0.1']);
    const report = await deliverWebhook(attemptFor(url), { pools });
    t.match(report, { outcome: 'success', statusCode: 200 });
    t.equal(sink.received.length, 1);
    t.equal(sink.received[0]?.headers.host, `${NAME}:${new URL(url).port}`, 'Host is the name');
    t.same(calls, [NAME]);
  },
);

t.test('a name re-bound to a forbidden address is refused at its next connection', async (t) => {
  // Only 127.0.0.1 is allowed: the name first resolves there, then (re-bound) to 127.0.0.2.
  let now = ['127.0.0.1'];
  const only = TargetPolicy.of(['127.0.0.1/32']);
  // The sink closes each connection, so every attempt connects (and resolves) afresh.
  const { sink, pools, calls, url } = await setUp(t, only, () => now, 'close');
  t.match(await deliverWebhook(attemptFor(url), { pools }), { outcome: 'success' });
  t.equal(sink.received.length, 1);
  now = ['127.0.0.2'];
  const report = await deliverWebhook(attemptFor(url), { pools });
  t.match(report, { outcome: 'fail', code: 'TARGET_FORBIDDEN', isProvablyUndelivered: true });
  t.match(report.error, /resolved to a loopback address 127\.0\.0\.2/);
  t.equal(sink.received.length, 1, 'the re-bound attempt never arrived');
  t.equal(calls.length, 2, 'resolved again for the new connection');
});

t.test('one forbidden address among allowed ones refuses the name', async (t) => {
  const only = TargetPolicy.of(['127.0.0.1/32']);
  const { sink, pools, url } = await setUp(t, only, () => ['127.0.0.1', '127.0.0.2']);
  const report = await deliverWebhook(attemptFor(url), { pools });
  t.match(report, { outcome: 'fail', code: 'TARGET_FORBIDDEN' });
  t.match(report.error, /127\.0\.0\.2/);
  t.equal(sink.connectionCount(), 0);
});

t.test('a literal forbidden address is refused at connect too', async (t) => {
  const { sink, pools, calls } = await setUp(t, TargetPolicy.STRICT, () => []);
  const port = new URL(sink.origin).port;
  for (const host of ['127.0.0.1', '[::ffff:127.0.0.1]', '[::1]']) {
    const report = await deliverWebhook(attemptFor(`http://${host}:${port}/hook`), { pools });
    t.match(
      report,
      { outcome: 'fail', code: 'TARGET_FORBIDDEN', isProvablyUndelivered: true },
      host,
    );
    t.match(report.error, /^TARGET_FORBIDDEN: \S+ is a loopback address/, host);
  }
  t.same(calls, [], 'a literal is never resolved');
  t.equal(sink.connectionCount(), 0);
});

t.test('a resolver failure stays a DNS failure (a retry that sent nothing)', async (t) => {
  const { pools } = await setUp(t, TargetPolicy.STRICT, () => []);
  const report = await deliverWebhook(attemptFor('http://no-such-name.test:1/hook'), { pools });
  t.match(report, { outcome: 'retry', code: 'DELIVERY_DNS_FAILED', isProvablyUndelivered: true });
});

t.test('https keeps the name as the TLS servername (SNI)', async (t) => {
  const seen: string[] = [];
  // No certificate at all: the handshake is refused right after the ClientHello is read.
  const server = createTlsServer({
    SNICallback: (servername, cb) => {
      seen.push(servername);
      cb(new Error('no certificate here'), undefined);
    },
  });
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { resolve } = resolverOf(() => ['127.0.0.1']);
  const pools = new OriginPools({ targetPolicy: TargetPolicy.of(['127.0.0.0/8']), resolve });
  t.teardown(async () => {
    await pools.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const { port } = server.address() as AddressInfo;
  const report = await deliverWebhook(attemptFor(`https://${NAME}:${port}/hook`), { pools });
  t.equal(report.outcome, 'retry', 'the refused handshake is a connection failure');
  t.same(seen, [NAME], 'the server saw the name as SNI');
});
