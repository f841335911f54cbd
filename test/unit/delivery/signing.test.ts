// Standard Webhooks signing. Goal: our signatures are the ones any Standard Webhooks receiver
// library computes, rotation sends one valid entry per secret, and verification rejects tampered
// bodies, ids, timestamps, wrong secrets and stale or future timestamps. Method: the reference
// vector of the standard-webhooks JavaScript library's test suite ("sign function works":
// secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp
// 1614265330, body {"test": 2432232314}), an independent HMAC computed here with node:crypto,
// then round trips with one and two secrets and a table of malformed secrets.
import { createHmac, randomBytes } from 'node:crypto';
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import {
  compileSigningKeys,
  signWebhook,
  validateSigningSecrets,
  verifyWebhook,
} from '../../../src/delivery/signing.js';

const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestampSec: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

const newSecret = (bytes = 32): string => `whsec_${randomBytes(bytes).toString('base64')}`;

t.test('matches the Standard Webhooks reference vector', (t) => {
  const keys = compileSigningKeys([VECTOR.secret]);
  t.equal(signWebhook(VECTOR, keys), VECTOR.signature);
  t.equal(signWebhook({ ...VECTOR, body: Buffer.from(VECTOR.body) }, keys), VECTOR.signature);
  const headers = {
    'webhook-id': VECTOR.id,
    'webhook-timestamp': String(VECTOR.timestampSec),
    'webhook-signature': VECTOR.signature,
  };
  t.strictSame(verifyWebhook(headers, VECTOR.body, keys, { nowMs: VECTOR.timestampSec * 1000 }), {
    ok: true,
  });
  t.end();
});

t.test('agrees with an HMAC computed independently', (t) => {
  const secret = newSecret(48);
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const body = '{"jobId":"j","payload":{"ü":"✓"}}';
  const want = createHmac('sha256', key).update(`f:1.1700000000.${body}`).digest('base64');
  t.equal(
    signWebhook({ id: 'f:1', timestampSec: 1_700_000_000, body }, compileSigningKeys([secret])),
    `v1,${want}`,
    'over the UTF-8 bytes of id.timestamp.body',
  );
  t.end();
});

t.test('rotation: two secrets give two entries, each verifiable alone', (t) => {
  const current = newSecret();
  const previous = newSecret();
  const both = compileSigningKeys([current, previous]);
  const content = { id: 'job-1:1700000000000', timestampSec: 1_700_000_000, body: '{"a":1}' };
  const header = signWebhook(content, both);
  const entries = header.split(' ');
  t.equal(entries.length, 2);
  t.equal(entries[0], signWebhook(content, compileSigningKeys([current])), 'current first');
  t.equal(entries[1], signWebhook(content, compileSigningKeys([previous])));
  const headers = {
    'webhook-id': content.id,
    'webhook-timestamp': String(content.timestampSec),
    'webhook-signature': header,
  };
  const at = { nowMs: content.timestampSec * 1000 };
  // A receiver that has not rotated yet, one that has, and one that knows both all accept.
  for (const receiver of [[previous], [current], [current, previous]]) {
    t.ok(verifyWebhook(headers, content.body, compileSigningKeys(receiver), at).ok);
  }
  t.notOk(verifyWebhook(headers, content.body, compileSigningKeys([newSecret()]), at).ok);
  t.end();
});

t.test('verification rejects tampering and bad timestamps', (t) => {
  const keys = compileSigningKeys([newSecret()]);
  const content = { id: 'j:1', timestampSec: 1_700_000_000, body: '{"fencingToken":7}' };
  const good = {
    'webhook-id': content.id,
    'webhook-timestamp': String(content.timestampSec),
    'webhook-signature': signWebhook(content, keys),
  };
  const nowMs = content.timestampSec * 1000;
  const check = (
    headers: Record<string, string | undefined>,
    body = content.body,
    at = nowMs,
  ): string => {
    const r = verifyWebhook(headers, body, keys, { nowMs: at });
    return r.ok ? 'ok' : r.reason;
  };
  t.equal(check(good), 'ok');
  t.equal(check(good, '{"fencingToken":8}'), 'no-matching-signature', 'body changed');
  t.equal(check({ ...good, 'webhook-id': 'j:2' }), 'no-matching-signature', 'id changed');
  t.equal(
    check({ ...good, 'webhook-timestamp': String(content.timestampSec + 1) }),
    'no-matching-signature',
    'timestamp changed',
  );
  t.equal(
    check({ ...good, 'webhook-timestamp': `0${content.timestampSec}` }),
    'no-matching-signature',
    'the timestamp is signed as text',
  );
  t.equal(check({ ...good, 'webhook-signature': 'v1,' }), 'no-matching-signature', 'empty');
  t.equal(
    check({ ...good, 'webhook-signature': good['webhook-signature'].slice(0, 10) }),
    'no-matching-signature',
    'partial signature',
  );
  t.equal(
    check({ ...good, 'webhook-signature': good['webhook-signature'].replace('v1,', 'v2,') }),
    'no-matching-signature',
    'another scheme version is not v1',
  );
  t.equal(
    check({ ...good, 'webhook-signature': `v1a,xyz v2,abc ${good['webhook-signature']}` }),
    'ok',
    'unknown entries are skipped, a matching v1 entry is enough',
  );
  t.equal(check({ ...good, 'webhook-id': undefined }), 'missing-header');
  t.equal(check({ ...good, 'webhook-signature': undefined }), 'missing-header');
  t.equal(check({ ...good, 'webhook-timestamp': 'hello' }), 'bad-timestamp');
  t.equal(check(good, content.body, nowMs + 300_000), 'ok', 'at the edge of the tolerance');
  t.equal(check(good, content.body, nowMs + 301_000), 'timestamp-too-old');
  t.equal(check(good, content.body, nowMs - 301_000), 'timestamp-too-new');
  t.end();
});

t.test('secrets are validated, every fault reported, none quoted', (t) => {
  const cases: [string, string[], string[]][] = [
    ['none', [], ['secrets']],
    ['three', [newSecret(), newSecret(), newSecret()], ['secrets']],
    ['no prefix', [randomBytes(32).toString('base64')], ['secrets[0]']],
    ['not base64', ['whsec_not*base64!!'], ['secrets[0]']],
    ['too short', [newSecret(16)], ['secrets[0]']],
    ['too long', [newSecret(65)], ['secrets[0]']],
    ['second bad', [newSecret(), 'whsec_'], ['secrets[1]']],
  ];
  for (const [what, secrets, fields] of cases) {
    const violations = validateSigningSecrets(secrets);
    t.strictSame(
      violations.map((v) => v.field),
      fields,
      what,
    );
    const bodies = secrets.map((s) => s.slice(6)).filter((b) => b.length > 0);
    for (const v of violations) {
      t.notOk(
        bodies.some((b) => v.reason.includes(b)),
        `${what}: no secret quoted`,
      );
    }
  }
  t.strictSame(validateSigningSecrets([newSecret(24)]), [], '24 bytes is the minimum');
  t.strictSame(validateSigningSecrets([newSecret(64)]), [], '64 bytes is the maximum');
  t.throws(() => compileSigningKeys(['nope']), ValidationError);
  try {
    compileSigningKeys(['nope']);
  } catch (err) {
    t.equal((err as ValidationError).code, 'DELIVERY_INVALID_SECRET');
  }
  t.end();
});
