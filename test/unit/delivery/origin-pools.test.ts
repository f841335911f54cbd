// The per-origin pool registry. Goal: one pool per origin whose open connections never exceed
// the bound, idle pools closed after idleCloseMs (busy ones never), the number of origins bounded
// (least recently used idle pool makes room, otherwise a typed refusal), and close() refusing
// new work. Method: a real node:http receiver on 127.0.0.1 that holds its answers, so concurrent
// requests pile up and the open sockets can be counted; a hand-driven Clock for idleness, with
// the sweep timer off and sweepIdle() called directly.
import t from 'tap';
import type { Clock } from '../../../src/base/clock.js';
import { ValidationError } from '../../../src/base/errors.js';
import { DeliveryError } from '../../../src/delivery/errors.js';
import { OriginPools } from '../../../src/delivery/origin-pools.js';
import { eventually, LOOPBACK_ALLOWED, startSink } from './http-sink.js';
import type { ServerResponse } from 'node:http';

class ManualClock implements Clock {
  ms = 0;
  nowMs(): number {
    return this.ms;
  }
  monotonicMs(): number {
    return this.ms;
  }
}

t.test('connections to one origin stay within the bound', async (t) => {
  const held: ServerResponse[] = [];
  const sink = await startSink((_req, res) => held.push(res));
  const pools = new OriginPools({ connectionsPerOrigin: 3, targetPolicy: LOOPBACK_ALLOWED });
  t.teardown(async () => {
    await pools.destroy();
    await sink.close();
  });
  const requests = Array.from({ length: 10 }, async () => {
    const lease = pools.acquire(sink.origin);
    try {
      const res = await lease.pool.request({ path: '/', method: 'POST', body: 'x' });
      await res.body.dump();
      return res.statusCode;
    } finally {
      lease.release();
    }
  });
  await eventually(() => held.length === 3, 5000, 'three requests held by the receiver');
  t.equal(sink.openConnectionCount(), 3, 'three sockets for ten concurrent requests');
  t.equal(pools.stats().inflightCount, 10);
  t.equal(pools.waitingCount, 7, 'seven wait for a socket (the runtime holds results then)');
  // Answer everything as it arrives; the queued seven go over the same three sockets.
  const answerAll = setInterval(() => {
    for (const res of held.splice(0)) res.end('ok');
  }, 5);
  const statuses = await Promise.all(requests);
  clearInterval(answerAll);
  t.strictSame(new Set(statuses), new Set([200]));
  t.equal(pools.waitingCount, 0, 'none waits once all answered');
  t.equal(sink.connectionCount(), 3, 'no socket beyond the bound was ever opened');
  t.strictSame(pools.stats(), {
    originCount: 1,
    inflightCount: 0,
    retiredCount: 0,
    closeFailureCount: 0,
  });
});

t.test('idle pools are closed after idleCloseMs, busy ones are not', (t) => {
  const clock = new ManualClock();
  const pools = new OriginPools({
    idleCloseMs: 1000,
    sweepIntervalMs: 0,
    clock,
    targetPolicy: LOOPBACK_ALLOWED,
  });
  t.teardown(() => pools.destroy());
  const a = pools.acquire('http://127.0.0.1:1');
  const b = pools.acquire('http://127.0.0.1:2');
  a.release();
  clock.ms = 999;
  t.equal(pools.sweepIdle(), 0, 'not idle long enough');
  clock.ms = 1000;
  t.equal(pools.sweepIdle(), 1, 'the idle one goes');
  clock.ms = 100_000;
  t.equal(pools.sweepIdle(), 0, 'the busy one stays however long it is busy');
  t.equal(pools.stats().originCount, 1);
  b.release();
  clock.ms = 100_999;
  t.equal(pools.sweepIdle(), 0, 'idleness counts from the last release');
  clock.ms = 101_000;
  t.equal(pools.sweepIdle(), 1);
  t.match(pools.stats(), { originCount: 0, retiredCount: 2 });
  // A retired origin gets a fresh pool on its next use.
  pools.acquire('http://127.0.0.1:1').release();
  t.equal(pools.stats().originCount, 1);
  t.throws(() => a.release(), { name: 'AssertionError' }, 'a lease is released once');
  t.end();
});

t.test('the number of origins is bounded', (t) => {
  const pools = new OriginPools({
    originsMax: 2,
    sweepIntervalMs: 0,
    targetPolicy: LOOPBACK_ALLOWED,
  });
  t.teardown(() => pools.destroy());
  const a = pools.acquire('http://127.0.0.1:1');
  const b = pools.acquire('http://127.0.0.1:2');
  try {
    pools.acquire('http://127.0.0.1:3');
    t.fail('a third origin while both pools are busy');
  } catch (err) {
    t.type(err, DeliveryError);
    t.match(err, { code: 'DELIVERY_ORIGINS_EXHAUSTED', outcome: 'retry' });
  }
  b.release();
  a.release();
  pools.acquire('http://127.0.0.1:2').release(); // now :1 is the least recently used
  pools.acquire('http://127.0.0.1:3').release();
  t.match(pools.stats(), { originCount: 2, retiredCount: 1 });
  // :1 made room and :2 survived: using :2 creates nothing.
  pools.acquire('http://127.0.0.1:2').release();
  t.match(pools.stats(), { originCount: 2, retiredCount: 1 });
  // Now :3 is the least recently used, so :1 coming back evicts :3, and :2 still survives.
  pools.acquire('http://127.0.0.1:1').release();
  pools.acquire('http://127.0.0.1:2').release();
  t.match(pools.stats(), { originCount: 2, retiredCount: 2 });
  t.end();
});

t.test('close() refuses new work', async (t) => {
  const pools = new OriginPools({ targetPolicy: LOOPBACK_ALLOWED });
  pools.acquire('http://127.0.0.1:1').release();
  await pools.close();
  t.throws(() => pools.acquire('http://127.0.0.1:1'), {
    code: 'DELIVERY_POOLS_CLOSED',
    outcome: 'retry',
  });
  t.equal(pools.stats().originCount, 0);
  await pools.close();
  t.pass('closing twice is harmless');
});

t.test('bad options are all reported', (t) => {
  try {
    new OriginPools({ connectionsPerOrigin: 0, idleCloseMs: -1, originsMax: 1.5 });
    t.fail('accepted');
  } catch (err) {
    t.type(err, ValidationError);
    t.equal((err as ValidationError).code, 'DELIVERY_INVALID_OPTIONS');
    t.strictSame(
      (err as ValidationError).violations.map((v) => v.field),
      ['connectionsPerOrigin', 'idleCloseMs', 'originsMax'],
    );
  }
  t.end();
});
