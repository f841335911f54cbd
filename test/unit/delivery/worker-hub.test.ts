// The node-side hub that leases run attempts to pull-based workers, with real timers and short
// leases (the lease lasts min(attemptDeadlineMs, leaseMaxMs)). Each worker is a fake stream that
// records what the hub told it. Goal: a lease goes to a worker of the job's pool that has room
// and offers the job's tags, least loaded first; a completion resolves the attempt with the
// worker's outcome and a stale one (wrong token, unknown fire id, already completed, leadership
// over) is refused and changes nothing; renewals keep a lease alive, an unrenewed lease comes
// back as a retry and is revoked; a waiting attempt gives up as provably undelivered; a stream
// that ends returns its runs; and closing the hub ends everything.
import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { TickraftError, ValidationError } from '../../../src/base/errors.js';
import type { Clock } from '../../../src/base/clock.js';
import type { StartVerdict } from '../../../src/delivery/delivery-runner.js';
import type { AttemptReport } from '../../../src/delivery/webhook.js';
import { RunOutputStore } from '../../../src/delivery/run-output-store.js';
import {
  WorkerHub,
  type RunLease,
  type WorkerCompletion,
  type WorkerHello,
  type WorkerLeaseRequest,
  type WorkerSession,
  type WorkerStreamIo,
} from '../../../src/delivery/worker-hub.js';

class FakeIo implements WorkerStreamIo {
  readonly leases: RunLease[] = [];
  readonly revokes: { fireId: string; token: number; reason: string }[] = [];
  readonly ends: string[] = [];
  lease(lease: RunLease): void {
    this.leases.push(lease);
  }
  revoke(fireId: string, token: number, reason: string): void {
    this.revokes.push({ fireId, token, reason });
  }
  end(reason: string): void {
    this.ends.push(reason);
  }
}

/** Wall-clock time is set by the test (so lease deadlines are exact); monotonic time is real. */
class TestClock implements Clock {
  wallMs = 1_900_000_000_000;
  nowMs(): number {
    return this.wallMs;
  }
  monotonicMs(): number {
    return performance.now();
  }
}

interface Worker {
  readonly session: WorkerSession;
  readonly io: FakeIo;
}

function connect(hub: WorkerHub, hello: Partial<WorkerHello> = {}): Worker {
  const io = new FakeIo();
  const session = hub.connect(
    { workerId: 'w-1', pool: 'render', tags: [], capacity: 4, ...hello },
    io,
  );
  return { session, io };
}

let serial = 0;
function request(over: Partial<WorkerLeaseRequest> = {}): WorkerLeaseRequest {
  const n = ++serial;
  const slotMs = 1_800_000_000_000 + n * 1000;
  return {
    target: { pool: 'render', tags: [] },
    jobId: `job-${n}`,
    tenant: 'acme',
    fireId: `job-${n}:${slotMs}`,
    slotMs,
    attempt: 1 + (n % 3),
    token: 2 ** 24 + n,
    payload: `{"frame":${n}}`,
    attemptDeadlineMs: 200,
    mayStart: () => 'start',
    ...over,
  };
}

/** An attempt's promise, and what it resolved with so far. */
interface Tracked {
  readonly promise: Promise<AttemptReport>;
  report: AttemptReport | undefined;
}

function track(promise: Promise<AttemptReport>): Tracked {
  const tracked: Tracked = { promise, report: undefined };
  void promise.then((r) => {
    tracked.report = r;
  });
  return tracked;
}

/** Lets resolved promises' callbacks run. */
const flush = (): Promise<void> => sleep(0);

/**
 * `p`'s value, failing after `ms`. The hub's timers are unref'd, so this ref'd timer also keeps
 * the process alive while the hub's timers run.
 */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  const ac = new AbortController();
  try {
    return await Promise.race([
      p,
      sleep(ms, undefined, { signal: ac.signal }).then(() => {
        throw new Error(`timed out after ${ms} ms waiting for ${what}`);
      }),
    ]);
  } finally {
    ac.abort();
  }
}

async function eventually(condition: () => boolean, ms: number, what: string): Promise<void> {
  const start = performance.now();
  while (!condition()) {
    if (performance.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

const ok = (output = ''): WorkerCompletion => ({
  success: true,
  retryable: false,
  error: '',
  retryAfterMs: undefined,
  output,
});

const failed = (
  retryable: boolean,
  error: string,
  retryAfterMs?: number,
  output = '',
): WorkerCompletion => ({ success: false, retryable, error, retryAfterMs, output });

function newHub(t: Test, options: ConstructorParameters<typeof WorkerHub>[0] = {}): WorkerHub {
  const hub = new WorkerHub(options);
  t.teardown(() => hub.close());
  return hub;
}

t.test('a lease goes to a connected worker of its pool, with the request’s fields', async (t) => {
  const clock = new TestClock();
  const hub = newHub(t, { clock });
  const other = connect(hub, { workerId: 'w-other', pool: 'other' });
  const w = connect(hub);
  const req = request({ attemptDeadlineMs: 150 });
  const attempt = track(hub.lease(req));
  t.equal(other.io.leases.length, 0, 'a worker of another pool gets nothing');
  t.strictSame(w.io.leases, [
    {
      jobId: req.jobId,
      tenant: 'acme',
      fireId: req.fireId,
      slotMs: req.slotMs,
      attempt: req.attempt,
      token: req.token,
      payload: req.payload,
      leaseMs: 150,
      leaseDeadlineMs: clock.wallMs + 150,
      outputMaxBytes: 0,
    },
  ]);
  t.equal(hub.heldCount, 1);
  t.equal(w.session.inflight, 1);
  t.equal(hub.stats.leased, 1);

  await flush();
  t.equal(attempt.report, undefined, 'the attempt is pending until the worker answers');
  const answer = w.session.complete(req.fireId, req.token, ok('rendered 3 frames'));
  t.equal(answer.ok, true);
  const report = await within(attempt.promise, 1000, 'the attempt');
  t.equal(report.outcome, 'success');
  t.equal(report.responseExcerpt, 'rendered 3 frames');
  t.equal(report.isProvablyUndelivered, false);
  t.equal(report.code, undefined);
  t.equal(report.error, undefined);
  t.ok(report.durationMs >= 0 && report.durationMs < 1000, 'a plausible duration');
  t.equal(hub.heldCount, 0);
  t.equal(w.session.inflight, 0);
  t.equal(hub.stats.completed, 1);
  t.strictSame(w.io.revokes, [], 'a completed lease is not revoked');
});

t.test('streamed output goes to the store; a stale part is refused like a renewal', async (t) => {
  const outputs = new RunOutputStore({ maxBytes: 20, storeBytes: 10_000 });
  const hub = newHub(t, { outputs });
  const w = connect(hub);
  const req = request({ attemptDeadlineMs: 5000 });
  const attempt = hub.lease(req);
  t.equal(w.io.leases[0]?.outputMaxBytes, 20, 'the lease says how much output the node keeps');
  t.notOk(outputs.has(req.fireId, req.attempt), 'nothing kept before the first part');
  t.match(w.session.output(req.fireId, req.token, 'line 1\n'), { ok: true });
  t.match(outputs.read(req.fireId, req.attempt, 0), { text: 'line 1\n', complete: false });
  const stale = w.session.output(req.fireId, req.token - 1, 'from an old attempt\n');
  t.match(stale, { ok: false, reason: /stale fencing token/ });
  t.match(w.session.output('job-x:1', req.token, 'x'), { ok: false, reason: /no such lease/ });
  t.equal(hub.stats.staleAnswers, 2);
  t.match(w.session.output(req.fireId, req.token, 'line 2 is long\n'), { ok: true });
  t.match(outputs.read(req.fireId, req.attempt, 0), {
    text: 'line 1\nline 2 is lon',
    truncated: true,
  });
  // The completion's output is the excerpt; the streamed output stays what was kept.
  t.match(w.session.complete(req.fireId, req.token, ok('summary')), { ok: true });
  const report = await within(attempt, 1000, 'the attempt');
  t.equal(report.responseExcerpt, 'summary');
  t.match(outputs.read(req.fireId, req.attempt, 0), {
    text: 'line 1\nline 2 is lon',
    complete: true,
  });
  t.match(w.session.output(req.fireId, req.token, 'late'), { ok: false }, 'after completion');

  // Nothing streamed: the completion's output is the attempt's output (the excerpt: 1,024
  // characters of it).
  const quiet = request({ attemptDeadlineMs: 5000 });
  const quietAttempt = hub.lease(quiet);
  const long = 'z'.repeat(2000);
  w.session.complete(quiet.fireId, quiet.token, ok(long));
  t.equal((await within(quietAttempt, 1000, 'the attempt')).responseExcerpt, 'z'.repeat(1024));
  t.match(outputs.read(quiet.fireId, quiet.attempt, 0), {
    text: 'z'.repeat(20),
    complete: true,
    truncated: true,
  });

  // A lease that expires ends its output too.
  const lapsed = request({ attemptDeadlineMs: 30 });
  const lapsedAttempt = hub.lease(lapsed);
  w.session.output(lapsed.fireId, lapsed.token, 'started');
  t.equal((await within(lapsedAttempt, 1000, 'the expiry')).code, 'WORKER_LEASE_EXPIRED');
  t.match(outputs.read(lapsed.fireId, lapsed.attempt, 0), { text: 'started', complete: true });

  // A node that keeps no output tells the worker so, and takes parts without keeping them.
  const off = newHub(t, { outputs: new RunOutputStore({ maxBytes: 0, storeBytes: 0 }) });
  const w2 = connect(off);
  const r2 = request({ attemptDeadlineMs: 5000 });
  void off.lease(r2);
  t.equal(w2.io.leases[0]?.outputMaxBytes, 0);
  t.match(w2.session.output(r2.fireId, r2.token, 'x'), { ok: true });
});

t.test('the lease lasts min(attemptDeadlineMs, leaseMaxMs)', async (t) => {
  const clock = new TestClock();
  const hub = newHub(t, { clock, leaseMaxMs: 60 });
  const w = connect(hub);
  const long = request({ attemptDeadlineMs: 60_000 });
  const started = performance.now();
  const attempt = hub.lease(long);
  t.equal(w.io.leases[0]?.leaseMs, 60, 'bounded by leaseMaxMs');
  t.equal(w.io.leases[0]?.leaseDeadlineMs, clock.wallMs + 60);
  const report = await within(attempt, 2000, 'the expiry');
  t.equal(report.code, 'WORKER_LEASE_EXPIRED');
  t.ok(performance.now() - started < 5000, 'expired after the bound, not the attempt deadline');
  const short = request({ attemptDeadlineMs: 40 });
  void hub.lease(short);
  t.equal(w.io.leases[1]?.leaseMs, 40, 'bounded by the attempt deadline');
});

t.test('a non-retryable failure fails the attempt, naming the worker', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { workerId: 'w-failing' });
  const req = request();
  const attempt = hub.lease(req);
  const answer = w.session.complete(
    req.fireId,
    req.token,
    failed(false, 'input file missing', 5000, 'partial log'),
  );
  t.equal(answer.ok, true);
  const report = await within(attempt, 1000, 'the attempt');
  t.equal(report.outcome, 'fail');
  t.equal(report.code, 'WORKER_FAILED');
  t.match(report.error, /w-failing/);
  t.match(report.error, /input file missing/);
  t.equal(report.responseExcerpt, 'partial log');
  t.equal(report.retryAfterMs, undefined, 'a failure that is not retried has no retry delay');
  t.equal(report.isProvablyUndelivered, false);
});

t.test('a retryable failure retries, with the worker’s wish for a delay', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { workerId: 'w-busy' });
  const req = request();
  const attempt = hub.lease(req);
  t.equal(w.session.complete(req.fireId, req.token, failed(true, 'gpu busy', 2500)).ok, true);
  const report = await within(attempt, 1000, 'the attempt');
  t.equal(report.outcome, 'retry');
  t.equal(report.code, 'WORKER_FAILED');
  t.equal(report.retryAfterMs, 2500);
  t.match(report.error, /w-busy: gpu busy/);
  t.equal(report.isProvablyUndelivered, false);

  const req2 = request();
  const attempt2 = hub.lease(req2);
  w.session.complete(req2.fireId, req2.token, failed(true, ''));
  const report2 = await within(attempt2, 1000, 'the second attempt');
  t.equal(report2.outcome, 'retry');
  t.equal(report2.retryAfterMs, undefined, 'no wish, no delay');
  t.match(report2.error, /w-busy: failed/, 'an empty error still says it failed');
});

t.test('a stale token or an unknown fire id is refused and changes nothing', async (t) => {
  const hub = newHub(t);
  const w = connect(hub);
  const intruder = connect(hub, { workerId: 'w-2' });
  const req = request();
  const attempt = track(hub.lease(req));
  const holder = w.io.leases.length === 1 ? w : intruder;
  const notHolder = holder === w ? intruder : w;

  const stale = holder.session.complete(req.fireId, req.token - 1, ok('stale'));
  t.equal(stale.ok, false);
  t.match(stale.ok ? '' : stale.reason, /stale fencing token/);
  const staleRenew = holder.session.renew(req.fireId, req.token + 1);
  t.equal(staleRenew.ok, false);
  t.match(staleRenew.ok ? '' : staleRenew.reason, /stale fencing token/);
  const unknown = holder.session.complete('no-such-fire', req.token, ok());
  t.equal(unknown.ok, false);
  t.match(unknown.ok ? '' : unknown.reason, /no such lease/);
  const elsewhere = notHolder.session.complete(req.fireId, req.token, ok('not mine'));
  t.equal(elsewhere.ok, false, 'another stream cannot complete the lease');
  t.match(elsewhere.ok ? '' : elsewhere.reason, /no such lease on this stream/);
  t.equal(hub.stats.staleAnswers, 4);

  await flush();
  t.equal(attempt.report, undefined, 'the attempt is still out');
  t.equal(hub.heldCount, 1);
  t.equal(holder.session.inflight, 1);
  t.equal(hub.stats.completed, 0);
  t.strictSame(holder.io.revokes, []);

  t.equal(holder.session.complete(req.fireId, req.token, ok('real')).ok, true);
  const report = await within(attempt.promise, 1000, 'the attempt');
  t.equal(report.outcome, 'success');
  t.equal(report.responseExcerpt, 'real');
});

t.test('a second completion is refused', async (t) => {
  const hub = newHub(t);
  const w = connect(hub);
  const req = request();
  const attempt = hub.lease(req);
  t.equal(w.session.complete(req.fireId, req.token, ok('first')).ok, true);
  const again = w.session.complete(req.fireId, req.token, failed(false, 'second'));
  t.equal(again.ok, false);
  t.match(again.ok ? '' : again.reason, /no such lease/);
  const report = await within(attempt, 1000, 'the attempt');
  t.equal(report.outcome, 'success', 'the first completion stands');
  t.equal(report.responseExcerpt, 'first');
  t.equal(hub.stats.completed, 1);
  t.equal(w.session.inflight, 0, 'the slot is freed once');
});

t.test('renewals keep a lease alive past its original deadline', async (t) => {
  const clock = new TestClock();
  const hub = newHub(t, { clock });
  const w = connect(hub);
  const req = request({ attemptDeadlineMs: 100 });
  const attempt = track(hub.lease(req));
  const started = performance.now();
  for (let i = 1; i <= 5; i++) {
    await sleep(40);
    clock.wallMs += 40;
    const answer = w.session.renew(req.fireId, req.token);
    t.strictSame(answer, { ok: true, leaseDeadlineMs: clock.wallMs + 100 }, `renewal ${i}`);
  }
  await sleep(40);
  t.ok(performance.now() - started > 200, 'more than two lease lengths went by');
  t.equal(attempt.report, undefined, 'still held');
  t.strictSame(w.io.revokes, []);
  t.equal(hub.stats.expired, 0);
  t.equal(w.session.complete(req.fireId, req.token, ok('done')).ok, true);
  const report = await within(attempt.promise, 1000, 'the attempt');
  t.equal(report.outcome, 'success');
  t.ok(report.durationMs >= 200, 'its duration covers the renewals');
});

t.test('an unrenewed lease expires, is revoked and comes back as a retry', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { workerId: 'w-slow' });
  const req = request({ attemptDeadlineMs: 50 });
  const attempt = hub.lease(req);
  const report = await within(attempt, 2000, 'the expiry');
  t.equal(report.outcome, 'retry');
  t.equal(report.code, 'WORKER_LEASE_EXPIRED');
  t.match(report.error, /w-slow/);
  t.match(report.error, /50 ms not renewed/);
  t.equal(report.isProvablyUndelivered, false, 'the worker may have run it');
  t.ok(report.durationMs >= 45, 'it lasted about the lease');
  t.equal(w.io.revokes.length, 1);
  t.equal(w.io.revokes[0]?.fireId, req.fireId);
  t.equal(w.io.revokes[0]?.token, req.token);
  t.equal(typeof w.io.revokes[0]?.reason, 'string');
  t.equal(hub.stats.expired, 1);
  t.equal(hub.heldCount, 0);
  t.equal(w.session.inflight, 0);

  const late = w.session.complete(req.fireId, req.token, ok('too late'));
  t.equal(late.ok, false, 'a completion after expiry is refused');
  t.match(late.ok ? '' : late.reason, /no such lease/);
  t.equal(w.session.renew(req.fireId, req.token).ok, false, 'so is a renewal');
});

t.test('at capacity, the next lease waits until a slot frees', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { capacity: 1 });
  const first = request();
  const second = request();
  const a1 = hub.lease(first);
  const a2 = track(hub.lease(second));
  t.strictSame(
    w.io.leases.map((l) => l.fireId),
    [first.fireId],
    'only one lease out',
  );
  t.equal(hub.waitingCount, 1);
  await sleep(20);
  t.equal(w.io.leases.length, 1, 'still one');
  t.equal(a2.report, undefined);

  w.session.complete(first.fireId, first.token, ok());
  t.strictSame(
    w.io.leases.map((l) => l.fireId),
    [first.fireId, second.fireId],
    'the second goes out when the first completes',
  );
  t.equal(hub.waitingCount, 0);
  t.equal((await within(a1, 1000, 'the first')).outcome, 'success');
  t.equal(w.session.complete(second.fireId, second.token, ok('2')).ok, true);
  const r2 = await within(a2.promise, 1000, 'the second');
  t.equal(r2.outcome, 'success');
  t.equal(r2.responseExcerpt, '2');
});

t.test('no worker within the lease bound: retry, provably undelivered', async (t) => {
  const hub = newHub(t);
  const report = await within(hub.lease(request({ attemptDeadlineMs: 60 })), 2000, 'the give-up');
  t.equal(report.outcome, 'retry');
  t.equal(report.code, 'WORKER_UNAVAILABLE');
  t.equal(report.isProvablyUndelivered, true);
  t.match(report.error, /no worker of pool render/);
  t.ok(report.durationMs >= 55, 'it waited about the lease bound');
  t.equal(hub.waitingCount, 0);
  t.equal(hub.stats.unavailable, 1);

  // A worker of the pool that lacks the tag does not count.
  const plain = connect(hub);
  const tagged = await within(
    hub.lease(request({ target: { pool: 'render', tags: ['gpu'] }, attemptDeadlineMs: 60 })),
    2000,
    'the tagged give-up',
  );
  t.equal(tagged.code, 'WORKER_UNAVAILABLE');
  t.match(tagged.error, /with tags gpu/);
  t.equal(plain.io.leases.length, 0);
});

t.test('a lease waiting with no worker is granted when one connects', async (t) => {
  const hub = newHub(t);
  let asked = 0;
  const req = request({
    attemptDeadlineMs: 1000,
    mayStart: () => {
      asked++;
      return 'start';
    },
  });
  const attempt = track(hub.lease(req));
  await sleep(20);
  t.equal(hub.waitingCount, 1);
  t.equal(asked, 0, 'mayStart is asked only when a worker is found');
  const w = connect(hub);
  t.equal(w.io.leases.length, 1, 'leased on connect');
  t.equal(w.io.leases[0]?.fireId, req.fireId);
  t.equal(asked, 1);
  t.equal(hub.waitingCount, 0);
  w.session.complete(req.fireId, req.token, ok());
  t.equal((await within(attempt.promise, 1000, 'the attempt')).outcome, 'success');
});

t.test('a job that needs a tag goes only to a worker offering it', async (t) => {
  const hub = newHub(t);
  const plain = connect(hub, { workerId: 'plain', capacity: 8 });
  const gpu = connect(hub, { workerId: 'gpu', tags: ['ssd', 'gpu'], capacity: 2 });
  const needs = (): WorkerLeaseRequest => request({ target: { pool: 'render', tags: ['gpu'] } });
  const r1 = needs();
  const r2 = needs();
  const r3 = needs();
  const a1 = hub.lease(r1);
  const a2 = hub.lease(r2);
  const a3 = track(hub.lease(r3));
  t.strictSame(
    gpu.io.leases.map((l) => l.fireId),
    [r1.fireId, r2.fireId],
  );
  t.equal(plain.io.leases.length, 0, 'the worker without gpu stays idle');
  t.equal(hub.waitingCount, 1, 'the third waits for the gpu worker, not the idle one');
  await sleep(20);
  t.equal(plain.io.leases.length, 0);

  gpu.session.complete(r1.fireId, r1.token, ok());
  t.equal(gpu.io.leases[2]?.fireId, r3.fireId);
  gpu.session.complete(r2.fireId, r2.token, ok());
  gpu.session.complete(r3.fireId, r3.token, ok());
  for (const a of [a1, a2, a3.promise]) {
    t.equal((await within(a, 1000, 'an attempt')).outcome, 'success');
  }
  const both = request({ target: { pool: 'render', tags: ['gpu', 'ssd'] } });
  void hub.lease(both);
  t.equal(gpu.io.leases.at(-1)?.fireId, both.fireId, 'a worker offering every tag');
  const missing = request({ target: { pool: 'render', tags: ['gpu', 'a100'] } });
  void hub.lease(missing);
  t.equal(hub.waitingCount, 1, 'no worker offers both gpu and a100');
});

t.test('the least-loaded worker (held / capacity) gets the lease', (t) => {
  const hub = newHub(t);
  const a = connect(hub, { workerId: 'a', capacity: 4 });
  const ra = [request(), request()];
  for (const r of ra) void hub.lease(r);
  t.equal(a.io.leases.length, 2, 'a holds 2 of 4');
  const b = connect(hub, { workerId: 'b', capacity: 10 });
  const rb = [request(), request(), request(), request()];
  for (const r of rb) void hub.lease(r);
  // b at 0, 1, 2 then 3 of 10 stays below a's 2 of 4.
  t.strictSame(
    b.io.leases.map((l) => l.fireId),
    rb.map((r) => r.fireId),
    'b holds more leases than a but is less loaded',
  );
  t.equal(a.io.leases.length, 2);
  // Completing a's two leaves a the least loaded.
  for (const r of ra) a.session.complete(r.fireId, r.token, ok());
  const next = request();
  void hub.lease(next);
  t.equal(a.io.leases.at(-1)?.fireId, next.fireId);
  t.equal(b.io.leases.length, 4);
  t.end();
});

for (const verdict of ['cancel', 'drop'] as const) {
  t.test(`mayStart '${verdict}' when a worker is found: never leased`, async (t) => {
    const hub = newHub(t);
    const w = connect(hub);
    const report = await within(
      hub.lease(request({ mayStart: () => verdict })),
      1000,
      'the attempt',
    );
    t.equal(report.outcome, 'retry');
    t.equal(report.code, 'DELIVERY_NOT_STARTED');
    t.equal(report.isProvablyUndelivered, true);
    t.match(report.error, verdict === 'drop' ? /leadership/ : /paused, deleted or updated/);
    t.equal(w.io.leases.length, 0, 'nothing leased');
    t.equal(w.session.inflight, 0);
    t.equal(hub.heldCount, 0);
    t.equal(hub.waitingCount, 0);
    t.equal(hub.stats.leased, 0);
  });
}

t.test("mayStart 'wait': asked again a few ms later, leased once it says start", async (t) => {
  const hub = newHub(t);
  const w = connect(hub);
  let asked = 0;
  const req = request({
    attemptDeadlineMs: 1000,
    mayStart: () => (++asked <= 3 ? 'wait' : 'start'),
  });
  const attempt = hub.lease(req);
  t.equal(asked, 1);
  t.equal(w.io.leases.length, 0, 'not leased while told to wait');
  t.equal(hub.waitingCount, 1);
  await eventually(() => w.io.leases.length > 0, 900, 'the lease');
  t.equal(asked, 4, 'asked until it said start');
  t.equal(w.io.leases[0]?.fireId, req.fireId);
  t.equal(hub.waitingCount, 0);
  w.session.complete(req.fireId, req.token, ok());
  t.equal((await within(attempt, 1000, 'the attempt')).outcome, 'success');
});

t.test("mayStart 'drop' at completion: refused, and the attempt is a retry", async (t) => {
  const hub = newHub(t);
  const w = connect(hub);
  let verdict: StartVerdict = 'start';
  const req = request({ mayStart: () => verdict });
  const attempt = hub.lease(req);
  t.equal(w.io.leases.length, 1);
  verdict = 'drop';
  const answer = w.session.complete(req.fireId, req.token, ok('done'));
  t.equal(answer.ok, false);
  t.match(answer.ok ? '' : answer.reason, /leadership that granted the lease ended/);
  const report = await within(attempt, 1000, 'the attempt');
  t.equal(report.outcome, 'retry', 'not the worker’s success');
  t.equal(report.isProvablyUndelivered, false);
  t.equal(hub.stats.completed, 0);
  t.equal(hub.heldCount, 0);
  t.equal(w.session.inflight, 0);

  // A renewal under a lapsed leadership is refused the same way.
  let verdict2: StartVerdict = 'start';
  const req2 = request({ mayStart: () => verdict2 });
  const attempt2 = hub.lease(req2);
  verdict2 = 'drop';
  const renew = w.session.renew(req2.fireId, req2.token);
  t.equal(renew.ok, false);
  t.match(renew.ok ? '' : renew.reason, /leadership/);
  t.equal((await within(attempt2, 1000, 'the second attempt')).outcome, 'retry');
});

t.test('a stream that closes returns its leases as retries', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { workerId: 'w-gone' });
  const r1 = request();
  const r2 = request();
  const a1 = hub.lease(r1);
  const a2 = hub.lease(r2);
  t.equal(w.io.leases.length, 2);
  w.session.close();
  for (const a of [a1, a2]) {
    const report = await within(a, 1000, 'an attempt');
    t.equal(report.outcome, 'retry');
    t.equal(report.code, 'WORKER_DISCONNECTED');
    t.equal(report.isProvablyUndelivered, false);
    t.match(report.error, /w-gone disconnected/);
  }
  t.equal(hub.stats.disconnected, 2);
  t.equal(hub.heldCount, 0);
  t.equal(w.session.isOpen, false);
  t.strictSame(hub.workerCounts(), new Map());
  t.strictSame(w.io.revokes, [], 'the stream is gone: nothing to revoke on it');
  t.strictSame(w.io.ends, [], 'the worker closed it: the hub does not end it');
  const late = w.session.complete(r1.fireId, r1.token, ok());
  t.strictSame(late, { ok: false, reason: 'the stream is closed' });
  t.strictSame(w.session.renew(r2.fireId, r2.token), { ok: false, reason: 'the stream is closed' });

  const next = track(hub.lease(request({ attemptDeadlineMs: 500 })));
  t.equal(w.io.leases.length, 2, 'a closed stream gets no new lease');
  t.equal(hub.waitingCount, 1);
  await flush();
  t.equal(next.report, undefined);
});

t.test('a draining worker gets no new leases but finishes its own', async (t) => {
  const hub = newHub(t);
  const draining = connect(hub, { workerId: 'draining' });
  const held = request();
  const attempt = hub.lease(held);
  t.equal(draining.io.leases.length, 1);
  draining.session.draining = true;

  const lone = await within(hub.lease(request({ attemptDeadlineMs: 50 })), 2000, 'the give-up');
  t.equal(lone.code, 'WORKER_UNAVAILABLE', 'a draining worker does not count');
  t.equal(draining.io.leases.length, 1);

  const fresh = connect(hub, { workerId: 'fresh', capacity: 1 });
  const r1 = request();
  const r2 = request();
  void hub.lease(r1);
  void hub.lease(r2);
  t.strictSame(
    fresh.io.leases.map((l) => l.fireId),
    [r1.fireId],
  );
  t.equal(draining.io.leases.length, 1, 'the draining worker still gets nothing');
  t.equal(hub.waitingCount, 1, 'the second waits for the fresh worker');

  t.equal(draining.session.complete(held.fireId, held.token, ok('last')).ok, true);
  const report = await within(attempt, 1000, 'the held attempt');
  t.equal(report.outcome, 'success');
  t.equal(draining.io.leases.length, 1, 'its freed slot is not refilled');
  t.equal(hub.waitingCount, 1);
});

t.test('a bad hello is refused with every bad field named', (t) => {
  const hub = newHub(t);
  const io = new FakeIo();
  const err = t.throws(() =>
    hub.connect({ workerId: '', pool: 'Render', tags: ['gpu', 'GPU', ''], capacity: 0 }, io),
  );
  t.ok(err instanceof ValidationError);
  if (err instanceof ValidationError) {
    t.equal(err.code, 'WORKER_HELLO_INVALID');
    t.strictSame(
      err.violations.map((v) => v.field),
      ['hello.worker_id', 'hello.pool', 'hello.tags[1]', 'hello.tags[2]', 'hello.capacity'],
    );
    t.match(err.message, /hello\.capacity: must be an integer in \[1, 1024\]/);
  }

  const fieldsOf = (hello: Partial<WorkerHello>): string[] => {
    try {
      connect(hub, hello);
      return [];
    } catch (e) {
      return e instanceof ValidationError ? e.violations.map((v) => v.field) : ['not validation'];
    }
  };
  t.strictSame(fieldsOf({ workerId: 'w'.repeat(129) }), ['hello.worker_id']);
  t.strictSame(fieldsOf({ capacity: 1.5 }), ['hello.capacity']);
  t.strictSame(fieldsOf({ capacity: 1025 }), ['hello.capacity']);
  t.strictSame(fieldsOf({ pool: '' }), ['hello.pool']);
  t.strictSame(fieldsOf({ tags: Array.from({ length: 17 }, (_, i) => `t${i}`) }), ['hello.tags']);
  t.equal(hub.stats.connected, 0);
  t.strictSame(hub.workerCounts(), new Map(), 'nothing connected');
  t.strictSame(
    fieldsOf({ workerId: 'w'.repeat(128), capacity: 1024, tags: ['gpu'] }),
    [],
    'the limits themselves pass',
  );
  t.strictSame(hub.workerCounts(), new Map([['render', 1]]));
  t.end();
});

t.test('hub.close ends the streams and resolves what waits', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { capacity: 1 });
  const held = request();
  const attemptHeld = hub.lease(held);
  const queued = track(hub.lease(request({ attemptDeadlineMs: 5000 })));
  const elsewhere = track(
    hub.lease(request({ target: { pool: 'nobody', tags: [] }, attemptDeadlineMs: 5000 })),
  );
  t.equal(hub.waitingCount, 2);
  hub.close();
  for (const a of [queued, elsewhere]) {
    const report = await within(a.promise, 1000, 'a waiting attempt');
    t.equal(report.outcome, 'retry');
    t.equal(report.code, 'WORKER_HUB_CLOSED');
    t.equal(report.isProvablyUndelivered, true);
  }
  const heldReport = await within(attemptHeld, 1000, 'the held attempt');
  t.equal(heldReport.code, 'WORKER_DISCONNECTED', 'a held lease comes back as a retry');
  t.equal(heldReport.outcome, 'retry');
  t.equal(w.io.leases.length, 1, 'nothing more was leased while closing');
  t.strictSame(w.io.ends, ['the node is shutting down']);
  t.equal(w.session.isOpen, false);
  t.equal(hub.waitingCount, 0);
  t.equal(hub.heldCount, 0);

  const after = await within(hub.lease(request()), 1000, 'a lease after close');
  t.equal(after.code, 'WORKER_HUB_CLOSED');
  t.equal(after.outcome, 'retry');
  t.equal(after.isProvablyUndelivered, true);
  const err = t.throws(() => connect(hub));
  t.ok(err instanceof TickraftError && err.code === 'WORKER_HUB_CLOSED', 'connect is refused');
  hub.close();
  t.strictSame(w.io.ends, ['the node is shutting down'], 'closing twice ends nothing twice');
});

t.test('hub.close leases nothing while it ends the streams', async (t) => {
  // A lease told to wait (the leadership's lease not provable for a moment) while a worker has
  // room must not be handed to that worker when another stream's lease ends during close.
  const hub = newHub(t);
  const busy = connect(hub, { workerId: 'busy', capacity: 1 });
  const held = request();
  const attemptHeld = hub.lease(held);
  const idle = connect(hub, { workerId: 'idle', capacity: 1 });
  let verdict: StartVerdict = 'wait';
  const waiting = hub.lease(request({ attemptDeadlineMs: 5000, mayStart: () => verdict }));
  t.equal(idle.io.leases.length, 0, 'told to wait, not leased');
  verdict = 'start';
  hub.close();
  const report = await within(waiting, 1000, 'the waiting attempt');
  t.equal(report.code, 'WORKER_HUB_CLOSED', 'reported as never leased');
  t.equal(report.isProvablyUndelivered, true);
  t.equal(idle.io.leases.length, 0, 'nothing was leased to a stream being ended');
  t.equal((await within(attemptHeld, 1000, 'the held attempt')).code, 'WORKER_DISCONNECTED');
  t.strictSame(busy.io.ends, ['the node is shutting down']);
  t.strictSame(idle.io.ends, ['the node is shutting down']);
});

t.test('a newer attempt of the same fire id supersedes the one still out', async (t) => {
  const hub = newHub(t);
  const w = connect(hub, { workerId: 'w-1' });
  const older = request();
  const attemptOlder = hub.lease(older);
  const newer = request({ fireId: older.fireId, token: older.token + 1, attempt: 2 });
  const attemptNewer = track(hub.lease(newer));
  const report = await within(attemptOlder, 1000, 'the older attempt');
  t.equal(report.outcome, 'retry');
  t.equal(report.code, 'WORKER_LEASE_EXPIRED');
  t.match(report.error, /superseded/);
  t.strictSame(w.io.revokes, [
    { fireId: older.fireId, token: older.token, reason: 'superseded by a newer attempt' },
  ]);
  t.strictSame(
    w.io.leases.map((l) => l.token),
    [older.token, newer.token],
  );
  t.equal(w.session.inflight, 1, 'one slot: the newer lease');
  t.equal(hub.heldCount, 1);
  const stale = w.session.complete(older.fireId, older.token, ok());
  t.equal(stale.ok, false, 'the older token is stale now');
  t.equal(w.session.complete(newer.fireId, newer.token, ok('v2')).ok, true);
  const r = await within(attemptNewer.promise, 1000, 'the newer attempt');
  t.equal(r.responseExcerpt, 'v2');
});

t.test('a run paused or deposed while it waits for a worker is released unleased', async (t) => {
  const hub = newHub(t);
  let verdict: 'start' | 'cancel' | 'drop' = 'start';
  // No worker: both wait. One gives up at its bound with its job paused meanwhile.
  const paused = track(
    hub.lease(
      request({
        attemptDeadlineMs: 40,
        mayStart: () => (verdict === 'start' ? 'start' : 'cancel'),
      }),
    ),
  );
  verdict = 'cancel';
  const report = await within(paused.promise, 1000, 'the paused attempt');
  t.equal(report.code, 'DELIVERY_NOT_STARTED', 'no attempt is recorded for a paused job');
  t.equal(report.isProvablyUndelivered, true);
  t.equal(hub.stats.unavailable, 0, 'not counted as a worker shortage');

  // The other is released at once when its leadership ends (the runner drops its owner's work).
  let deposed = false;
  const waiting = track(
    hub.lease(request({ attemptDeadlineMs: 10_000, mayStart: () => (deposed ? 'drop' : 'start') })),
  );
  const kept = track(hub.lease(request({ attemptDeadlineMs: 10_000 })));
  t.equal(hub.waitingCount, 2);
  deposed = true;
  t.equal(hub.releaseWaiting(), 1, 'only the deposed owner’s attempt is released');
  const dropped = await within(waiting.promise, 1000, 'the released attempt');
  t.equal(dropped.code, 'DELIVERY_NOT_STARTED');
  t.match(dropped.error, /leadership/);
  t.equal(hub.waitingCount, 1, 'the other keeps waiting');
  await flush();
  t.equal(kept.report, undefined);
  const w = connect(hub);
  t.equal(w.io.leases.length, 1, 'and is leased when a worker comes');
});

t.test('a worker’s retry delay is capped at 24 h', async (t) => {
  const hub = newHub(t);
  const w = connect(hub);
  const req = request();
  const attempt = hub.lease(req);
  t.equal(w.session.complete(req.fireId, req.token, failed(true, 'later', 10 ** 12)).ok, true);
  const report = await within(attempt, 1000, 'the attempt');
  t.equal(report.retryAfterMs, 24 * 3_600_000);
});
