// Classification of attempt endings. Goal: every rule of docs/API.md's webhook and retry sections
// maps to the outcome it promises (2xx success; 408, 429, 5xx, timeouts and connection errors
// retry; other statuses fail at once), Retry-After is honoured in both of its forms and capped, and
// only provably unsent requests count as safe to retry for at-most-once jobs. Method: tables of
// observations with the expected classification, plus undici and Node error objects built the
// way those libraries build them, so the mapping from real errors is checked too.
import t from 'tap';
import {
  classify,
  isProvablyUndelivered,
  observeError,
  parseHttpDateMs,
  parseRetryAfterMs,
  RETRY_AFTER_MAX_MS,
  type AttemptObservation,
} from '../../../src/delivery/classify.js';

const NOW = Date.UTC(2024, 2, 10, 12, 0, 0); // Sun, 10 Mar 2024 12:00:00 GMT
const opts = { nowMs: NOW };
const response = (statusCode: number, retryAfter?: string): AttemptObservation => ({
  kind: 'response',
  statusCode,
  retryAfter,
});

t.test('status codes map to success, retry or fail', (t) => {
  const cases: [number, 'success' | 'retry' | 'fail'][] = [
    [200, 'success'],
    [201, 'success'],
    [202, 'success'],
    [204, 'success'],
    [299, 'success'],
    [301, 'fail'],
    [302, 'fail'],
    [304, 'fail'],
    [307, 'fail'],
    [400, 'fail'],
    [401, 'fail'],
    [403, 'fail'],
    [404, 'fail'],
    [405, 'fail'],
    [408, 'retry'],
    [409, 'fail'],
    [410, 'fail'],
    [413, 'fail'],
    [422, 'fail'],
    [425, 'fail'],
    [429, 'retry'],
    [451, 'fail'],
    [499, 'fail'],
    [500, 'retry'],
    [501, 'retry'],
    [502, 'retry'],
    [503, 'retry'],
    [504, 'retry'],
    [599, 'retry'],
    [600, 'fail'],
    [999, 'fail'],
    [199, 'fail'],
  ];
  for (const [status, outcome] of cases) {
    const c = classify(response(status), opts);
    t.equal(c.outcome, outcome, `${status}`);
    t.equal(c.code, outcome === 'success' ? undefined : 'DELIVERY_HTTP_STATUS', `${status} code`);
    t.match(c.reason, `http ${status}`, `${status} reason`);
  }
  t.match(classify(response(302), opts).reason, 'not followed');
  t.end();
});

t.test('Retry-After is honoured on retryable statuses only', (t) => {
  t.equal(classify(response(429, '7'), opts).retryAfterMs, 7000);
  t.equal(classify(response(503, '0'), opts).retryAfterMs, 0);
  t.equal(classify(response(408, '2'), opts).retryAfterMs, 2000);
  t.equal(classify(response(500, '3'), opts).retryAfterMs, 3000);
  t.equal(classify(response(503, 'Sun, 10 Mar 2024 12:00:30 GMT'), opts).retryAfterMs, 30_000);
  // On success and on a failing status the header has nothing to say.
  t.equal(classify(response(200, '7'), opts).retryAfterMs, undefined);
  t.equal(classify(response(404, '7'), opts).retryAfterMs, undefined);
  // A retry without a usable header falls back to the backoff (no retryAfterMs at all).
  t.notOk('retryAfterMs' in classify(response(503), opts));
  t.notOk('retryAfterMs' in classify(response(503, 'soon'), opts));
  t.end();
});

t.test('Retry-After delta-seconds', (t) => {
  const cases: [string, number | undefined][] = [
    ['0', 0],
    ['1', 1000],
    ['120', 120_000],
    [' 5 ', 5000],
    ['007', 7000],
    ['86400', 86_400_000],
    ['86401', RETRY_AFTER_MAX_MS], // capped at 24 h
    ['99999999999999999999999', RETRY_AFTER_MAX_MS], // no overflow, capped
    ['-5', undefined],
    ['1.5', undefined],
    ['1e3', undefined],
    ['', undefined],
    ['five', undefined],
    ['5 s', undefined],
  ];
  for (const [value, want] of cases) {
    t.equal(parseRetryAfterMs(value, NOW), want, JSON.stringify(value));
  }
  t.equal(parseRetryAfterMs('600', NOW, 60_000), 60_000, 'a smaller cap applies');
  t.end();
});

t.test('Retry-After HTTP-date in its three forms, relative to the injected clock', (t) => {
  const cases: [string, number | undefined][] = [
    ['Sun, 10 Mar 2024 12:01:00 GMT', 60_000], // IMF-fixdate
    ['Sunday, 10-Mar-24 12:01:00 GMT', 60_000], // RFC 850
    ['Sun Mar 10 12:01:00 2024', 60_000], // asctime
    ['Sun Mar  1 12:00:00 2024', 0], // asctime, one-digit day, in the past
    ['Sun, 10 Mar 2024 11:59:00 GMT', 0], // the past means now
    ['Mon, 11 Mar 2024 12:00:00 GMT', 86_400_000],
    ['Fri, 01 Mar 2030 00:00:00 GMT', RETRY_AFTER_MAX_MS], // capped
    ['Thu, 29 Feb 2024 12:00:00 GMT', 0], // leap day exists in 2024
    ['Wed, 29 Feb 2023 12:00:00 GMT', undefined], // and not in 2023
    ['Sun, 10 Mar 2024 24:00:00 GMT', undefined],
    ['Sun, 10 Mar 2024 12:60:00 GMT', undefined],
    ['Sun, 32 Mar 2024 12:00:00 GMT', undefined],
    ['Sun, 10 Foo 2024 12:00:00 GMT', undefined],
    ['Sun, 10 Mar 2024 12:01:00 UTC', undefined], // only GMT is allowed
    ['sun, 10 mar 2024 12:01:00 gmt', undefined], // names are case-sensitive
    ['2024-03-10T12:01:00Z', undefined], // ISO is not an HTTP-date
  ];
  for (const [value, want] of cases) {
    t.equal(parseRetryAfterMs(value, NOW), want, value);
  }
  t.end();
});

t.test('HTTP-date parsing: exact instants and two-digit years', (t) => {
  t.equal(parseHttpDateMs('Sun, 06 Nov 1994 08:49:37 GMT', NOW), Date.UTC(1994, 10, 6, 8, 49, 37));
  t.equal(
    parseHttpDateMs('Sunday, 06-Nov-94 08:49:37 GMT', NOW),
    Date.UTC(1994, 10, 6, 8, 49, 37),
    'RFC 850 "94" is 1994 when now is 2024 (2094 would be more than 50 years ahead)',
  );
  t.equal(
    parseHttpDateMs('Monday, 01-Jan-30 00:00:00 GMT', NOW),
    Date.UTC(2030, 0, 1),
    '"30" is 2030, within 50 years',
  );
  t.equal(parseHttpDateMs('Sun Nov  6 08:49:37 1994', NOW), Date.UTC(1994, 10, 6, 8, 49, 37));
  t.equal(
    parseHttpDateMs('Sat, 31 Dec 2016 23:59:60 GMT', NOW),
    Date.UTC(2016, 11, 31, 23, 59, 59),
    'a leap second reads as the second before',
  );
  t.end();
});

t.test('timeouts, network errors, aborts and local refusals', (t) => {
  const cases: [AttemptObservation, string, string | undefined, boolean][] = [
    // observation, outcome, code, provably undelivered
    [{ kind: 'timeout', phase: 'deadline' }, 'retry', 'DELIVERY_TIMEOUT', false],
    [{ kind: 'timeout', phase: 'connect' }, 'retry', 'DELIVERY_TIMEOUT', false],
    [{ kind: 'timeout', phase: 'headers' }, 'retry', 'DELIVERY_TIMEOUT', false],
    [{ kind: 'timeout', phase: 'body' }, 'retry', 'DELIVERY_TIMEOUT', false],
    [net('ECONNREFUSED'), 'retry', 'DELIVERY_CONNECTION_REFUSED', true],
    [net('ENOTFOUND'), 'retry', 'DELIVERY_DNS_FAILED', true],
    [net('EAI_AGAIN'), 'retry', 'DELIVERY_DNS_FAILED', true],
    [net('ECONNRESET'), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [net('EPIPE'), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [net('UND_ERR_SOCKET'), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [net('EHOSTUNREACH'), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [net('ETIMEDOUT'), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [net('CERT_HAS_EXPIRED'), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [net('HPE_INVALID_CONSTANT'), 'retry', 'DELIVERY_PROTOCOL_ERROR', false],
    [net(undefined), 'retry', 'DELIVERY_CONNECTION_FAILED', false],
    [{ kind: 'aborted', isBeforeDispatch: false }, 'retry', 'DELIVERY_ABORTED', false],
    [{ kind: 'aborted', isBeforeDispatch: true }, 'retry', 'DELIVERY_ABORTED', true],
    [{ kind: 'invalid-request', reason: 'bad' }, 'fail', 'DELIVERY_INVALID_REQUEST', true],
    [{ kind: 'forbidden', reason: 'x is loopback' }, 'fail', 'TARGET_FORBIDDEN', true],
    [
      { kind: 'not-dispatched', code: 'DELIVERY_POOLS_CLOSED', reason: 'closed' },
      'retry',
      'DELIVERY_POOLS_CLOSED',
      true,
    ],
    [
      { kind: 'not-dispatched', code: 'DELIVERY_ORIGINS_EXHAUSTED', reason: 'busy' },
      'retry',
      'DELIVERY_ORIGINS_EXHAUSTED',
      true,
    ],
  ];
  for (const [observation, outcome, code, undelivered] of cases) {
    const what = JSON.stringify(observation);
    const c = classify(observation, opts);
    t.equal(c.outcome, outcome, `${what} outcome`);
    t.equal(c.code, code, `${what} code`);
    t.equal(c.retryAfterMs, undefined, `${what} has no Retry-After`);
    t.equal(isProvablyUndelivered(observation), undelivered, `${what} undelivered`);
  }
  t.end();
});

t.test('any answer at all means the request may have been processed', (t) => {
  for (const status of [200, 404, 429, 500, 503]) {
    t.equal(isProvablyUndelivered(response(status)), false, `${status}`);
  }
  t.end();
});

t.test('errors as undici and Node raise them map to observations', (t) => {
  const withCode = (code: string, message = code): Error =>
    Object.assign(new Error(message), { code });
  t.strictSame(observeError(withCode('UND_ERR_CONNECT_TIMEOUT')), {
    kind: 'timeout',
    phase: 'connect',
  });
  t.strictSame(observeError(withCode('UND_ERR_HEADERS_TIMEOUT')), {
    kind: 'timeout',
    phase: 'headers',
  });
  t.strictSame(observeError(withCode('UND_ERR_BODY_TIMEOUT')), { kind: 'timeout', phase: 'body' });
  t.match(observeError(withCode('UND_ERR_INVALID_ARG', 'invalid header')), {
    kind: 'invalid-request',
    reason: 'invalid header',
  });
  t.match(observeError(withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9')), {
    kind: 'network',
    errorCode: 'ECONNREFUSED',
  });
  // The guarded connector's refusal (guarded-connect.ts): final, the code leading the reason.
  const forbidden = observeError(withCode('TARGET_FORBIDDEN', 'h resolved to 127.0.0.1'));
  t.strictSame(forbidden, { kind: 'forbidden', reason: 'h resolved to 127.0.0.1' });
  t.strictSame(classify(forbidden, opts), {
    outcome: 'fail',
    code: 'TARGET_FORBIDDEN',
    reason: 'TARGET_FORBIDDEN: h resolved to 127.0.0.1',
  });
  t.match(observeError(new Error('no code')), { kind: 'network', errorCode: undefined });
  t.match(observeError('a string'), { kind: 'network', errorCode: undefined, message: 'a string' });

  // Happy-eyeballs connects report one error per address. Refused everywhere is a refusal;
  // refused on one address and reset on another is not a clean refusal.
  const allRefused = new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')]);
  t.match(observeError(allRefused), { kind: 'network', errorCode: 'ECONNREFUSED' });
  t.equal(isProvablyUndelivered(observeError(allRefused)), true);
  const mixed = new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNRESET')]);
  t.equal(isProvablyUndelivered(observeError(mixed)), false);
  t.equal(classify(observeError(mixed), opts).outcome, 'retry');
  t.end();
});

t.test('a long network message is truncated in the reason', (t) => {
  const c = classify({ kind: 'network', errorCode: 'ECONNRESET', message: 'x'.repeat(1000) }, opts);
  t.ok(c.reason.length <= 200, `reason is ${c.reason.length} chars`);
  t.end();
});

function net(errorCode: string | undefined): AttemptObservation {
  return { kind: 'network', errorCode, message: 'm' };
}
