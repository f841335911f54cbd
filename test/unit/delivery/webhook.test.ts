// One webhook attempt over real HTTP. Goal: the request is exactly what the contract says (body
// fields and order, headers, a signature any Standard Webhooks receiver accepts, the job's own
// headers but never over reserved ones), and every way an attempt can end becomes the right
// outcome without a throw: 2xx, 503, 429 with Retry-After, 404, 302, a response that never
// comes, a body that stalls, a refused connection, a caller abort, closed pools. The response
// excerpt is bounded and cut on a character boundary, and bodies are consumed (connection reused)
// or destroyed (connection dropped). Method: a node:http server on 127.0.0.1, port 0, recording
// what it received and which TCP connection carried it; no mocks. Deadlines are checked with a
// generous upper bound only; timing figures belong in bench/delivery.ts.
import { setMaxListeners } from 'node:events';
import t, { type Test } from 'tap';
import { compileSigningKeys, verifyWebhook } from '../../../src/delivery/signing.js';
import {
  buildWebhookRequest,
  deliverWebhook,
  originOf,
  validateWebhookJob,
  wholeUtf8Length,
  type WebhookAttempt,
  type WebhookJob,
} from '../../../src/delivery/webhook.js';
import { OriginPools } from '../../../src/delivery/origin-pools.js';
import {
  closedPort,
  eventually,
  LOOPBACK_ALLOWED,
  startSink,
  type Sink,
  type SinkHandler,
} from './http-sink.js';

const CURRENT = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const PREVIOUS = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const SLOT_MS = Date.UTC(2024, 2, 10, 9, 30, 0);
const NOW_MS = SLOT_MS + 12;

function attemptFor(url: string, patch: Partial<WebhookJob> = {}): WebhookAttempt {
  return {
    job: {
      id: 'acme/job-7', // the job's key: the body names it job-7
      tenant: 'acme',
      target: { url, headers: { 'X-Team': 'billing' } },
      payload: '{"invoice":12345678901234567890,"note":"ünïcode"}',
      attemptDeadlineMs: 5000,
      ...patch,
    },
    fireId: `acme/job-7:${SLOT_MS}`,
    slotMs: SLOT_MS,
    attempt: 3,
    token: 16_777_219,
    signing: compileSigningKeys([CURRENT, PREVIOUS]),
    nowMs: NOW_MS,
  };
}

const answer =
  (status: number, body = '', headers: Record<string, string> = {}): SinkHandler =>
  (_req, res) => {
    res.writeHead(status, headers);
    res.end(body);
  };
const hang: SinkHandler = () => undefined;

async function withSink(
  t: Test,
  handler: SinkHandler,
  connectionsPerOrigin = 4,
): Promise<{ sink: Sink; pools: OriginPools }> {
  const sink = await startSink(handler);
  const pools = new OriginPools({ connectionsPerOrigin, targetPolicy: LOOPBACK_ALLOWED });
  t.teardown(async () => {
    await pools.destroy();
    await sink.close();
  });
  return { sink, pools };
}

t.test('the request carries the specified body, headers and a verifiable signature', async (t) => {
  const { sink, pools } = await withSink(t, answer(200, 'ok'));
  const attempt = attemptFor(`${sink.origin}/hooks/fire?src=tickraft`);
  const report = await deliverWebhook(attempt, { pools });

  t.match(report, { outcome: 'success', statusCode: 200, responseExcerpt: 'ok' });
  t.equal(report.isProvablyUndelivered, false);
  t.notOk('code' in report || 'error' in report || 'retryAfterMs' in report);
  t.ok(report.durationMs >= 0 && Number.isInteger(report.durationMs));

  t.equal(sink.received.length, 1);
  const req = sink.received[0];
  if (req === undefined) throw new Error('no request');
  t.equal(req.method, 'POST');
  t.equal(req.url, '/hooks/fire?src=tickraft');
  t.equal(
    req.body,
    '{"jobId":"job-7","tenant":"acme","fireId":"acme/job-7:1710063000000",' +
      '"slot":"2024-03-10T09:30:00.000Z","slotMs":1710063000000,"attempt":3,' +
      '"fencingToken":16777219,"payload":{"invoice":12345678901234567890,"note":"ünïcode"}}',
    'fields in order; the payload spliced verbatim, big integer digits intact',
  );
  const h = req.headers;
  t.equal(h['content-type'], 'application/json');
  t.equal(h['idempotency-key'], 'acme/job-7:1710063000000');
  t.equal(h['tickraft-fencing-token'], '16777219');
  t.equal(h['tickraft-scheduled-for'], '2024-03-10T09:30:00.000Z');
  t.equal(h['tickraft-attempt'], '3');
  t.equal(h['webhook-id'], 'acme/job-7:1710063000000');
  t.equal(h['webhook-timestamp'], String(Math.floor(NOW_MS / 1000)));
  t.equal(h['x-team'], 'billing', 'the job’s own header');
  t.equal(h['user-agent'], 'tickraft-webhook/1');
  t.equal(String(h['webhook-signature']).split(' ').length, 2, 'one entry per secret');

  // A receiver holding either secret accepts the request as received on the wire.
  for (const secret of [CURRENT, PREVIOUS]) {
    const verdict = verifyWebhook(h, req.body, compileSigningKeys([secret]), { nowMs: NOW_MS });
    t.strictSame(verdict, { ok: true }, `verifies with ${secret === CURRENT ? 'current' : 'old'}`);
  }
  const other = compileSigningKeys([`whsec_${Buffer.alloc(32, 9).toString('base64')}`]);
  t.notOk(verifyWebhook(h, req.body, other, { nowMs: NOW_MS }).ok, 'a stranger’s key does not');
});

t.test('statuses map to outcomes', async (t) => {
  const cases: [string, SinkHandler, Record<string, unknown>][] = [
    ['201', answer(201, 'created'), { outcome: 'success', statusCode: 201 }],
    ['204', answer(204), { outcome: 'success', statusCode: 204, responseExcerpt: '' }],
    [
      '503',
      answer(503, 'busy'),
      { outcome: 'retry', statusCode: 503, code: 'DELIVERY_HTTP_STATUS', responseExcerpt: 'busy' },
    ],
    [
      '429 with Retry-After seconds',
      answer(429, 'slow down', { 'Retry-After': '7' }),
      { outcome: 'retry', statusCode: 429, retryAfterMs: 7000 },
    ],
    [
      '503 with Retry-After date',
      answer(503, '', { 'Retry-After': 'Sun, 10 Mar 2024 09:31:00 GMT' }),
      { outcome: 'retry', statusCode: 503, retryAfterMs: Number },
    ],
    ['500', answer(500), { outcome: 'retry', statusCode: 500 }],
    ['408', answer(408), { outcome: 'retry', statusCode: 408 }],
    [
      '404',
      answer(404, 'no such hook'),
      { outcome: 'fail', statusCode: 404, code: 'DELIVERY_HTTP_STATUS', error: 'http 404' },
    ],
    ['400', answer(400), { outcome: 'fail', statusCode: 400 }],
    [
      '302 is not followed',
      answer(302, '', { Location: 'http://127.0.0.1:1/elsewhere' }),
      { outcome: 'fail', statusCode: 302 },
    ],
  ];
  for (const [what, handler, want] of cases) {
    const { sink, pools } = await withSink(t, handler);
    const report = await deliverWebhook(attemptFor(`${sink.origin}/h`), { pools });
    t.match(report, want, what);
    t.equal(report.isProvablyUndelivered, false, `${what}: the target answered`);
    t.equal(sink.received.length, 1, `${what}: exactly one request`);
    if (what === '503 with Retry-After date') {
      // The date is 60 s after the attempt's clock; the wait counts from when the answer came.
      const wait = report.retryAfterMs ?? -1;
      t.ok(wait <= 60_000 - 12 && wait > 60_000 - 12 - 5000, `waits ${wait} ms`);
    }
  }
});

t.test('the response excerpt is bounded and ends on a whole character', async (t) => {
  // 'a' then two-byte characters: byte 512 falls in the middle of one.
  const body = 'a' + 'é'.repeat(5000);
  const { sink, pools } = await withSink(t, answer(500, body));
  const report = await deliverWebhook(attemptFor(`${sink.origin}/h`), { pools });
  t.equal(report.outcome, 'retry');
  const bytes = Buffer.byteLength(report.responseExcerpt);
  t.ok(bytes <= 512 && bytes >= 510, `excerpt is ${bytes} bytes`);
  t.notOk(report.responseExcerpt.includes('\uFFFD'), 'no replacement character at the cut');
  t.ok(body.startsWith(report.responseExcerpt));

  const small = await deliverWebhook(attemptFor(`${sink.origin}/h`), {
    pools,
    limits: { responseExcerptBytes: 16 },
  });
  t.equal(small.responseExcerpt, 'a' + 'é'.repeat(7), 'a smaller limit, same rule');
});

t.test('the output is the body up to its bound, beside the 512-byte excerpt', async (t) => {
  let body = '';
  let status = 200;
  const { sink, pools } = await withSink(t, (_req, res) => {
    res.writeHead(status);
    res.end(body);
  });
  const url = `${sink.origin}/h`;
  // Without an output bound (the default) there is no output, only the excerpt.
  body = 'x'.repeat(2000);
  const none = await deliverWebhook(attemptFor(url), { pools });
  t.equal(none.output, undefined, 'no output without limits.outputBytes');
  t.equal(none.responseExcerpt.length, 512);

  const limits = { outputBytes: 64 * 1024 };
  // 100 KiB: the output is the first 64 KiB, marked truncated; the excerpt stays 512 bytes.
  body = 'y'.repeat(100 * 1024);
  const big = await deliverWebhook(attemptFor(url), { pools, limits });
  t.equal(big.outcome, 'success');
  t.equal(big.responseExcerpt, 'y'.repeat(512), 'the excerpt is still 512 bytes');
  t.equal(big.output?.text, 'y'.repeat(64 * 1024), 'the output is the first 64 KiB');
  t.equal(big.output?.truncated, true, 'marked cut at the bound');

  // A body within the bound is the whole output; within the excerpt, the same string.
  body = 'z'.repeat(40_000);
  const fits = await deliverWebhook(attemptFor(url), { pools, limits });
  t.same(fits.output, { text: body, truncated: false });
  body = 'small';
  const small = await deliverWebhook(attemptFor(url), { pools, limits });
  t.same(small.output, { text: 'small', truncated: false });
  t.equal(small.responseExcerpt, 'small');

  // The bound falls inside a 3-byte character: the output ends at the last whole one.
  body = 'a' + '€'.repeat(30_000);
  const cut = await deliverWebhook(attemptFor(url), { pools, limits: { outputBytes: 1000 } });
  t.equal(cut.output?.text, 'a' + '€'.repeat(333), '1 + 333 × 3 = 1000 bytes');
  t.equal(cut.output?.truncated, true);
  t.notOk(cut.responseExcerpt.includes('\uFFFD'), 'the excerpt has no cut character either');
  t.equal(Buffer.byteLength(cut.responseExcerpt), 511, 'the excerpt: 1 + 170 × 3 bytes');

  // An error answer keeps its body as output too (it is what explains the failure).
  body = 'stack trace';
  status = 500;
  const failed = await deliverWebhook(attemptFor(url), { pools, limits });
  t.equal(failed.outcome, 'retry');
  t.same(failed.output, { text: 'stack trace', truncated: false });

  // No answer, no output.
  const refused = await deliverWebhook(attemptFor(`http://127.0.0.1:${await closedPort()}/h`), {
    pools,
    limits,
  });
  t.equal(refused.output, undefined, 'a refused connection has no output');
});

t.test('bodies are consumed to reuse the connection, or destroyed when too long', async (t) => {
  let big = false;
  // One connection per origin: a body left unread would keep it busy and block the next
  // attempt; a reused connection shows the body was read to its end.
  const handler: SinkHandler = (_req, res) => {
    res.writeHead(200);
    res.end(big ? 'x'.repeat(1 << 20) : 'fine');
  };
  const { sink, pools } = await withSink(t, handler, 1);
  for (let i = 0; i < 5; i++) {
    t.equal((await deliverWebhook(attemptFor(`${sink.origin}/h`), { pools })).outcome, 'success');
  }
  t.equal(sink.connectionCount(), 1, 'five sequential attempts share one keep-alive connection');
  big = true;
  const report = await deliverWebhook(attemptFor(`${sink.origin}/h`), { pools });
  t.match(report, { outcome: 'success', statusCode: 200 });
  t.equal(report.responseExcerpt.length, 512);
  big = false;
  t.equal((await deliverWebhook(attemptFor(`${sink.origin}/h`), { pools })).outcome, 'success');
  t.equal(sink.connectionCount(), 2, 'the 1 MiB body was cut off with its connection');
  t.equal(pools.stats().inflightCount, 0, 'every lease returned');
});

t.test('a response that never comes ends at the attempt deadline', async (t) => {
  const { sink, pools } = await withSink(t, hang);
  const report = await deliverWebhook(attemptFor(`${sink.origin}/h`, { attemptDeadlineMs: 300 }), {
    pools,
  });
  t.match(report, {
    outcome: 'retry',
    code: 'DELIVERY_TIMEOUT',
    error: 'attempt deadline passed',
    responseExcerpt: '',
  });
  t.notOk('statusCode' in report);
  t.equal(report.isProvablyUndelivered, false, 'the target got the request and may act on it');
  t.ok(report.durationMs >= 290, `took ${report.durationMs} ms, not less than the deadline`);
  t.ok(report.durationMs < 5000, 'and not much more');
  t.equal(sink.received.length, 1);
});

t.test('a 2xx whose body stalls is still a success, cut at the deadline', async (t) => {
  const { sink, pools } = await withSink(t, (_req, res) => {
    res.writeHead(200, { 'Content-Length': '100' });
    res.write('partial');
  });
  const report = await deliverWebhook(attemptFor(`${sink.origin}/h`, { attemptDeadlineMs: 300 }), {
    pools,
  });
  t.match(report, { outcome: 'success', statusCode: 200, responseExcerpt: 'partial' });
  t.match(report.error, /^response body: /, 'the cut is reported beside the success');
  t.notOk('code' in report);
});

t.test('a refused connection retries and provably sent nothing', async (t) => {
  const pools = new OriginPools({ targetPolicy: LOOPBACK_ALLOWED });
  t.teardown(() => pools.destroy());
  const port = await closedPort();
  const report = await deliverWebhook(attemptFor(`http://127.0.0.1:${port}/h`), { pools });
  t.match(report, {
    outcome: 'retry',
    code: 'DELIVERY_CONNECTION_REFUSED',
    isProvablyUndelivered: true,
    responseExcerpt: '',
  });
  t.notOk('statusCode' in report);
});

t.test('requests that cannot be built fail at once and send nothing', async (t) => {
  const { sink, pools } = await withSink(t, answer(200));
  const url = `${sink.origin}/h`;
  const cases: [string, Partial<WebhookJob>, RegExp][] = [
    [
      'reserved header',
      { target: { url, headers: { 'Idempotency-Key': 'mine' } } },
      /Idempotency-Key: name is reserved/,
    ],
    [
      'reserved prefix',
      { target: { url, headers: { 'Tickraft-Fencing-Token': '0' } } },
      /names starting/,
    ],
    [
      'webhook- prefix',
      { target: { url, headers: { 'webhook-signature': 'v1,x' } } },
      /names starting/,
    ],
    ['content-type', { target: { url, headers: { 'Content-Type': 'text/plain' } } }, /reserved/],
    ['header injection', { target: { url, headers: { 'X-A': 'a\r\nX-B: b' } } }, /without CR/],
    ['bad header name', { target: { url, headers: { 'X A': 'v' } } }, /HTTP token/],
    ['not a URL', { target: { url: 'not a url', headers: {} } }, /absolute URL/],
    ['ftp', { target: { url: 'ftp://127.0.0.1/x', headers: {} } }, /http or https/],
    [
      'credentials',
      { target: { url: 'http://u:p@127.0.0.1/x', headers: {} } },
      /must not carry credentials/,
    ],
    [
      'too many headers',
      {
        target: {
          url,
          headers: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`x-h${i}`, 'v'])),
        },
      },
      /target.headers: at most 32/,
    ],
    [
      'header value too long',
      { target: { url, headers: { 'X-Long': 'v'.repeat(4097) } } },
      /at most 4096 characters/,
    ],
    ['payload not JSON', { payload: '{oops' }, /payload: must be JSON/],
    ['no deadline', { attemptDeadlineMs: 0 }, /attemptDeadlineMs/],
  ];
  for (const [what, patch, reason] of cases) {
    const report = await deliverWebhook(attemptFor(url, patch), { pools });
    t.match(
      report,
      { outcome: 'fail', code: 'DELIVERY_INVALID_REQUEST', isProvablyUndelivered: true },
      what,
    );
    t.match(report.error, reason, `${what}: reason`);
  }
  t.equal(sink.received.length, 0, 'nothing reached the target');
  t.equal(pools.stats().originCount, 0, 'no pool was even created');
});

t.test('validation collects every violation with its field', (t) => {
  const violations = validateWebhookJob(
    {
      id: 't/j',
      tenant: 't',
      target: { url: 'mailto:x', headers: { Host: 'h', 'x-a': '1', 'X-A': '2' } },
      payload: 'nope',
      attemptDeadlineMs: 1e9,
    },
    'spec.',
  );
  t.strictSame(
    violations.map((v) => v.field),
    [
      'spec.target.url',
      'spec.target.headers.Host',
      'spec.target.headers.X-A',
      'spec.attemptDeadlineMs',
      'spec.payload',
    ],
  );
  t.equal(originOf('https://Hooks.Example.com:443/a?b'), 'https://hooks.example.com');
  t.equal(originOf('nope'), undefined);
  const empty = buildWebhookRequest(attemptFor('http://127.0.0.1:1/', { payload: ' ' }));
  t.ok(empty.ok && empty.request.body.endsWith('"payload":null}'), 'an empty payload is null');
  t.end();
});

t.test('the caller’s signal ends an attempt as a retry', async (t) => {
  const { sink, pools } = await withSink(t, hang);
  const controller = new AbortController();
  // One signal shared by every attempt of a dispatcher: each adds and removes one listener.
  setMaxListeners(0, controller.signal);
  const pending = deliverWebhook(attemptFor(`${sink.origin}/h`), {
    pools,
    signal: controller.signal,
  });
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (sink.received.length === 1) {
        clearInterval(poll);
        resolve();
      }
    }, 5);
  });
  controller.abort();
  const report = await pending;
  t.match(report, { outcome: 'retry', code: 'DELIVERY_ABORTED', isProvablyUndelivered: false });

  const before = await deliverWebhook(attemptFor(`${sink.origin}/h`), {
    pools,
    signal: controller.signal,
  });
  t.match(before, { outcome: 'retry', code: 'DELIVERY_ABORTED', isProvablyUndelivered: true });
  t.equal(sink.received.length, 1, 'an already-aborted attempt sends nothing');
});

t.test('closed pools refuse locally, as a retry that sent nothing', async (t) => {
  const { sink, pools } = await withSink(t, answer(200));
  await pools.close();
  const report = await deliverWebhook(attemptFor(`${sink.origin}/h`), { pools });
  t.match(report, { outcome: 'retry', code: 'DELIVERY_POOLS_CLOSED', isProvablyUndelivered: true });
  t.equal(sink.received.length, 0);
});

t.test('an attempt that ends while waiting for a connection is never written', async (t) => {
  // One connection, held by a request the receiver never answers.
  const { sink, pools } = await withSink(t, hang, 1);
  const first = new AbortController();
  const holding = deliverWebhook(attemptFor(`${sink.origin}/h`), { pools, signal: first.signal });
  await eventually(() => sink.received.length === 1, 5000, 'the first request arrived');

  const queued = await deliverWebhook(attemptFor(`${sink.origin}/h`, { attemptDeadlineMs: 200 }), {
    pools,
  });
  t.match(queued, {
    outcome: 'retry',
    code: 'DELIVERY_TIMEOUT',
    error: 'attempt deadline passed before a connection was free',
    isProvablyUndelivered: true,
  });
  const second = new AbortController();
  const abortedInQueue = deliverWebhook(attemptFor(`${sink.origin}/h`), {
    pools,
    signal: second.signal,
  });
  second.abort();
  t.match(await abortedInQueue, {
    outcome: 'retry',
    code: 'DELIVERY_ABORTED',
    isProvablyUndelivered: true,
  });

  // Free the connection: undici now hands the two queued requests a socket, and each is aborted
  // in onRequestStart, before a byte is written.
  first.abort();
  t.match(await holding, { code: 'DELIVERY_ABORTED', isProvablyUndelivered: false });
  await eventually(() => pools.stats().inflightCount === 0, 5000, 'undici let go of both');
  t.equal(sink.received.length, 1, 'only the first request ever reached the receiver');
});

t.test('wholeUtf8Length drops only a cut trailing character', (t) => {
  const whole = Buffer.from('aé€😀', 'utf8'); // 1 + 2 + 3 + 4 bytes
  const cases: [number, number][] = [
    [0, 0],
    [1, 1],
    [2, 1], // é cut after its first byte
    [3, 3],
    [4, 3], // € cut after 1 byte
    [5, 3], // € cut after 2 bytes
    [6, 6],
    [7, 6], // 😀 cut after 1 byte
    [8, 6],
    [9, 6],
    [10, 10],
  ];
  for (const [length, want] of cases) {
    t.equal(wholeUtf8Length(whole.subarray(0, length)), want, `${length} bytes`);
  }
  t.equal(wholeUtf8Length(Buffer.from([0x80, 0x80, 0x80, 0x80])), 4, 'garbage is left alone');
  t.end();
});
