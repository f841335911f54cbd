// Pull-based workers with real processes (docs/API.md, Workers): jobs whose target is
// `worker:<pool>` are leased over WorkerService.Work streams to a worker connected to every node;
// renewals keep a long run's lease, an unrenewed lease returns the run with a higher token, stale
// completions are refused, and a leader killed while a worker holds a lease leaves the run to the
// next one.
import * as grpc from '@grpc/grpc-js';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { ApiCallError, ApiClient, bearerMetadata } from '../../src/api/client.js';
import { loadApiServices } from '../../src/api/proto.js';
import {
  PermanentRunError,
  Worker,
  type LeasedRun,
  type WorkerResult,
} from '../../src/api/worker-client.js';
import { eventually, sleep, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import { endpointOf } from '../helpers/api-cluster.js';
import { iso, SchedulerCluster, slotAhead, TENANT } from '../helpers/scheduler-cluster.js';
import { nodeCommand } from '../helpers/node-child.js';
import { TICKCTL } from '../helpers/tickctl.js';

interface Seen {
  readonly run: LeasedRun;
  readonly atMs: number;
  aborted: boolean;
}

type Handler = (run: LeasedRun, signal: AbortSignal, seen: Seen) => Promise<WorkerResult | void>;

/** A Worker whose handler is chosen per job, recording every lease it was given. */
function testWorker(
  sc: SchedulerCluster,
  opts: { pool: string; tags?: string[]; capacity?: number; id: string },
  handlers: Record<string, Handler>,
): { worker: Worker; seen: Seen[]; refused: string[] } {
  const seen: Seen[] = [];
  const refused: string[] = [];
  const n0 = sc.cluster.nodes[0]!;
  const endpoint = `${n0.host}:${n0.apiPort}`;
  const worker = new Worker({
    endpoints: [endpoint],
    token: TEST_ADMIN_TOKEN,
    workerId: opts.id,
    pool: opts.pool,
    tags: opts.tags ?? [],
    capacity: opts.capacity ?? 8,
    discoverEveryMs: 500,
    onRefused: (fireId, kind, reason) => refused.push(`${fireId} ${kind}: ${reason}`),
    handle: (run, signal) => {
      const s: Seen = { run, atMs: Date.now(), aborted: false };
      signal.addEventListener('abort', () => {
        s.aborted = true;
      });
      seen.push(s);
      const h = handlers[run.jobId] ?? (() => Promise.resolve({ output: 'done' }));
      return h(run, signal, s);
    },
  });
  return { worker, seen, refused };
}

/** Polls a synchronous check until it stops throwing. */
function waitFor<T>(fn: () => T, timeoutMs: number): Promise<T> {
  return eventually(() => Promise.resolve().then(fn), timeoutMs);
}

function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
  });
}

/**
 * Each node registers its API address in the meta group shortly after it is ready; a worker
 * finds the nodes by those addresses, so a test that counts them starts it once all are there,
 * as ApiCluster waits.
 */
async function everyApiAddressRegistered(t: Test, sc: SchedulerCluster): Promise<void> {
  const status = new ApiClient(
    endpointOf(sc.cluster.nodes[0]!),
    5000,
    {},
    { token: TEST_ADMIN_TOKEN },
  );
  t.teardown(() => status.close());
  await eventually(async () => {
    const st = await status.call<{ nodes: { apiAddress: string }[] }>(
      'AdminService',
      'ClusterStatus',
      {},
    );
    if (st.nodes.length !== 3 || st.nodes.some((n) => n.apiAddress === ''))
      throw new Error('API addresses not all registered');
  }, 20_000);
}

t.test('worker jobs: leased on time, renewed, retried, tagged, failed for good', async (t) => {
  const sc = await SchedulerCluster.start(t);
  const fastRetry = { initialBackoffMs: 200, maxBackoffMs: 200, maxAttempts: 3 };
  const handlers: Record<string, Handler> = {
    'w-flaky': (run) =>
      run.attempt === 1
        ? Promise.reject(new Error('database busy'))
        : Promise.resolve({ output: 'second time lucky' }),
    'w-perm': () => Promise.reject(new PermanentRunError('bad input')),
    'w-long': async () => {
      await sleep(2500);
      return { output: 'long done' };
    },
  };
  const plain = testWorker(sc, { pool: 'reports', id: 'w1' }, handlers);
  const worker = plain.worker;
  // A second worker of the pool offering tags: it takes untagged jobs too, and alone the tagged.
  const gpu = testWorker(sc, { pool: 'reports', tags: ['gpu', 'eu'], id: 'w-gpu' }, handlers);
  const seenAll = (jobId: string): Seen[] =>
    [...plain.seen, ...gpu.seen]
      .filter((s) => s.run.jobId === jobId)
      .sort((a, b) => a.run.fencingToken - b.run.fencingToken);
  t.teardown(() => Promise.all([worker.stop(), gpu.worker.stop()]));
  await everyApiAddressRegistered(t, sc);
  await worker.start();
  await gpu.worker.start();
  t.equal(worker.nodes.length, 3, `the worker found every node (${worker.nodes.join(', ')})`);
  const slot = slotAhead(4000);
  await sc.createJob('w-every', {
    schedule: '* * * * * *',
    target: { url: 'worker:reports' },
    payload: { report: 'daily' },
  });
  const one = (extra: Record<string, unknown>): Record<string, unknown> => ({
    schedule: `at ${iso(slot)}`,
    target: { url: 'worker:reports' },
    retry: fastRetry,
    ...extra,
  });
  await sc.createJob('w-flaky', one({}));
  await sc.createJob('w-perm', one({}));
  await sc.createJob('w-long', one({ attemptDeadlineMs: 1000 }));
  await sc.createJob('w-gpu', one({ target: { url: 'worker:reports?tags=gpu' } }));

  const flaky = await sc.runOf('w-flaky', slot, (r) => r.status === 'SUCCEEDED');
  t.equal(flaky.attempts.length, 2, 'a retryable failure is retried');
  t.match(flaky.attempts[0]?.error, /w(1|-gpu): database busy/, 'the worker error is recorded');
  t.ok(flaky.attempts[1]!.token > flaky.attempts[0]!.token, 'the retry has a higher token');
  t.equal(flaky.attempts[1]?.responseExcerpt, 'second time lucky', 'the output is kept');

  const perm = await sc.runOf('w-perm', slot, (r) => r.status === 'DEAD');
  t.equal(perm.attempts.length, 1, 'a permanent failure is not retried');
  t.match(perm.attempts[0]?.error, /bad input/);

  const long = await sc.runOf('w-long', slot, (r) => r.status === 'SUCCEEDED');
  t.equal(long.attempts.length, 1, 'renewals kept a 2.5 s run alive on a 1 s lease');
  t.equal(long.attempts[0]?.responseExcerpt, 'long done');

  const tagged = await sc.runOf('w-gpu', slot, (r) => r.status === 'SUCCEEDED');
  t.equal(tagged.attempts.length, 1);
  t.ok(
    gpu.seen.some((s) => s.run.jobId === 'w-gpu') &&
      !plain.seen.some((s) => s.run.jobId === 'w-gpu'),
    'a tagged job went only to the worker offering its tags',
  );

  // The every-second job: each slot leased once, on time, tokens increasing.
  await sleep(1500);
  const upTo = Date.now() - 1500;
  const every = seenAll('w-every').filter((s) => s.run.slotMs <= upTo);
  t.ok(every.length >= 5, `every-second worker job leased ${every.length} times`);
  const slots = every.map((s) => s.run.slotMs);
  t.equal(new Set(slots).size, slots.length, 'each slot leased once');
  t.ok(
    slots.every((s, i) => i === 0 || s - slots[i - 1]! === 1000),
    'no slot skipped',
  );
  t.ok(
    every.every((s) => s.atMs - s.run.slotMs < 1000),
    `lag under a second (max ${Math.max(...every.map((s) => s.atMs - s.run.slotMs))} ms)`,
  );
  t.ok(
    every.every((s, i) => i === 0 || s.run.fencingToken > every[i - 1]!.run.fencingToken),
    'tokens increase',
  );
  t.same(JSON.parse(every[0]!.run.payloadJson), { report: 'daily' }, 'payload as defined');
  const { runs } = await sc.getJob('w-every');
  const done = runs.filter((r) => r.slotMs <= upTo);
  t.ok(
    done.every((r) => r.status === 'SUCCEEDED'),
    'every run of the every-second job SUCCEEDED',
  );
});

/** A raw Work stream, for protocol-level checks. */
function rawStream(address: string): {
  call: grpc.ClientDuplexStream<Record<string, unknown>, Record<string, unknown>>;
  messages: Array<Record<string, unknown>>;
  ended: Promise<grpc.ServiceError | undefined>;
  client: grpc.Client;
} {
  const ctor = loadApiServices().WorkerService;
  const client = new ctor(address, grpc.credentials.createInsecure());
  const def = ctor.service['Work']!;
  const call = client.makeBidiStreamRequest(
    def.path,
    def.requestSerialize,
    def.responseDeserialize,
    bearerMetadata(TEST_ADMIN_TOKEN),
    {},
  ) as grpc.ClientDuplexStream<Record<string, unknown>, Record<string, unknown>>;
  const messages: Array<Record<string, unknown>> = [];
  call.on('data', (m: Record<string, unknown>) => messages.push(m));
  const ended = new Promise<grpc.ServiceError | undefined>((resolve) => {
    call.on('error', (err: grpc.ServiceError) => resolve(err));
    call.on('end', () => resolve(undefined));
  });
  return { call, messages, ended, client };
}

t.test('the Work stream: bad hellos are refused by field; stale answers are refused', async (t) => {
  const sc = await SchedulerCluster.start(t, { groups: 2 });
  const n0 = sc.cluster.nodes[0]!;
  const address = `${n0.host}:${n0.apiPort}`;

  const noHello = rawStream(address);
  noHello.call.write({ renew: { fireId: 'x:1', fencingToken: 1 } });
  const e1 = await noHello.ended;
  t.equal(e1?.code, grpc.status.INVALID_ARGUMENT, 'a stream not starting with hello is refused');
  t.match(ApiCallError.from(e1!).violations, [{ field: 'hello' }]);
  noHello.client.close();

  const badHello = rawStream(address);
  badHello.call.write({
    hello: { workerId: '', pool: 'Bad Pool', tags: ['ok', 'NO'], capacity: 0 },
  });
  const e2 = await badHello.ended;
  t.equal(e2?.code, grpc.status.INVALID_ARGUMENT);
  const fields = ApiCallError.from(e2!)
    .violations.map((v) => v.field)
    .sort();
  t.same(
    fields,
    ['hello.capacity', 'hello.pool', 'hello.tags[1]', 'hello.worker_id'],
    'every bad hello field is named',
  );
  badHello.client.close();

  // A raw stream to every node: the lease comes from whichever leads the job's group.
  const raws = sc.cluster.nodes.map((n) => rawStream(`${n.host}:${n.apiPort}`));
  for (const r of raws)
    r.call.write({ hello: { workerId: 'raw', pool: 'raw', tags: [], capacity: 1 } });
  const jobId = 'raw-job';
  const slot = slotAhead(3000);
  await sc.createJob(jobId, {
    schedule: `at ${iso(slot)}`,
    target: { url: 'worker:raw' },
    attemptDeadlineMs: 1000,
    retry: { initialBackoffMs: 200, maxBackoffMs: 200, maxAttempts: 3 },
  });
  const leaseOf = (attempt: number) =>
    waitFor(() => {
      for (const r of raws) {
        const m = r.messages.find(
          (x) => x['lease'] && (x['lease'] as { attempt: number }).attempt === attempt,
        );
        if (m) return { raw: r, lease: m['lease'] as Record<string, unknown> };
      }
      throw new Error(`no lease of attempt ${attempt} yet`);
    }, 15_000);
  const first = await leaseOf(1);
  t.equal(first.lease['fireId'], `${TENANT}/${jobId}:${slot}`, 'leased with the fire id');
  t.equal(first.lease['jobId'], jobId, 'the job named by its id');
  t.equal(first.lease['tenant'], TENANT, 'and its tenant');
  const leader = await sc.leaderOf(sc.groupOf(jobId));
  t.equal(first.lease['nodeId'], leader.node.id, 'by the leader of the group');
  t.equal(first.lease['leaseMs'], 1000, "the lease lasts the job's attempt deadline");
  const firstToken = first.lease['fencingToken'] as number;
  // Not renewed: revoked after its 1 s, and the run is leased again.
  const revoked = await waitFor(() => {
    const m = first.raw.messages.find((x) => x['revoked']);
    if (!m) throw new Error('not revoked yet');
    return m['revoked'] as Record<string, unknown>;
  }, 5000);
  t.equal(revoked['fencingToken'], firstToken, 'the unrenewed lease is revoked');
  t.match(revoked['reason'], /expired/);
  const ackOf = async (
    raw: (typeof raws)[number],
    kind: string,
    n: number,
  ): Promise<Record<string, unknown>> =>
    waitFor(() => {
      const acks = raw.messages.filter(
        (x) => x['ack'] && (x['ack'] as { kind: string }).kind === kind,
      );
      if (acks.length < n) throw new Error(`no ${kind} ack yet`);
      return acks[n - 1]!['ack'] as Record<string, unknown>;
    }, 5000);
  first.raw.call.write({
    complete: { fireId: first.lease['fireId'], fencingToken: firstToken, success: true },
  });
  const late = await ackOf(first.raw, 'complete', 1);
  t.equal(late['ok'], false, 'completing a revoked lease is refused');
  const second = await leaseOf(2);
  const token = second.lease['fencingToken'] as number;
  t.ok(token > firstToken, 'the second attempt has a higher token');
  t.equal(second.lease['fireId'], first.lease['fireId'], 'and the same fire id');
  const raw = second.raw;
  const completes = raw === first.raw ? 1 : 0;
  raw.call.write({ renew: { fireId: second.lease['fireId'], fencingToken: token } });
  const renewed = await ackOf(raw, 'renew', 1);
  t.equal(renewed['ok'], true, 'a renewal with the right token is accepted');
  t.ok((renewed['leaseDeadlineMs'] as number) > Date.now(), 'with a new deadline ahead');
  raw.call.write({
    complete: { fireId: second.lease['fireId'], fencingToken: firstToken, success: true },
  });
  const stale = await ackOf(raw, 'complete', completes + 1);
  t.equal(stale['ok'], false, 'a completion with a stale token is refused');
  t.match(stale['reason'], /stale fencing token/);
  raw.call.write({
    complete: {
      fireId: second.lease['fireId'],
      fencingToken: token,
      success: true,
      output: 'raw ok',
    },
  });
  t.equal((await ackOf(raw, 'complete', completes + 2))['ok'], true, 'the right token completes');
  raw.call.write({
    complete: { fireId: second.lease['fireId'], fencingToken: token, success: true },
  });
  t.equal(
    (await ackOf(raw, 'complete', completes + 3))['ok'],
    false,
    'a second completion is refused',
  );
  const run = await sc.runOf(jobId, slot, (r) => r.status === 'SUCCEEDED');
  t.equal(run.attempts.length, 2);
  t.match(run.attempts[0]?.error, /lease of 1000 ms not renewed/, 'the expiry is recorded');
  t.equal(run.attempts[1]?.responseExcerpt, 'raw ok');
  for (const r of raws) {
    r.call.end();
    r.client.close();
  }
});

t.test(
  'kill -9 of the leader while a worker holds a lease: leased again, higher token',
  async (t) => {
    const sc = await SchedulerCluster.start(t);
    const jobId = 'held-lease';
    const groupId = sc.groupOf(jobId);
    let firstAborted = false;
    const { worker, seen } = testWorker(
      sc,
      { pool: 'crash', id: 'w-crash' },
      {
        [jobId]: async (run, signal) => {
          if (run.attempt === 1 && seen.filter((s) => s.run.jobId === jobId).length === 1) {
            await untilAborted(signal).catch(() => {
              firstAborted = true;
            });
            return { output: 'too late' };
          }
          return { output: 'after the crash' };
        },
      },
    );
    t.teardown(() => worker.stop());
    await worker.start();
    const slot = slotAhead(3000);
    await sc.createJob(jobId, { schedule: `at ${iso(slot)}`, target: { url: 'worker:crash' } });
    await waitFor(() => {
      if (!seen.some((s) => s.run.jobId === jobId)) throw new Error('not leased yet');
    }, 15_000);
    const first = seen.find((s) => s.run.jobId === jobId)!;
    // The node that granted the lease led the group then (leader balancing may move a group
    // right after start-up, so it is read from the lease, not guessed before it).
    const granting = sc.cluster.nodes.find((n) => n.id === first.run.nodeId)!;
    const before = (await granting.status()).groups.find((g) => g.groupId === groupId)!;
    t.equal(before.role, 'leader', `the lease came from the group's leader ${granting.id}`);
    await granting.kill9();
    const second = await sc.leaderOf(groupId);
    t.ok(second.term > before.term, `new leader ${second.node.id} in term ${second.term}`);
    const run = await sc.runOf(jobId, slot, (r) => r.status === 'SUCCEEDED', 30_000);
    const leases = seen.filter((s) => s.run.jobId === jobId);
    t.equal(leases.length, 2, 'leased twice: once per leader');
    t.ok(firstAborted, "the dead leader's lease was abandoned (its stream ended)");
    t.equal(leases[1]!.run.fireId, leases[0]!.run.fireId, 'same fire id');
    t.ok(leases[1]!.run.fencingToken > leases[0]!.run.fencingToken, 'higher fencing token');
    t.equal(leases[1]!.run.nodeId, second.node.id, 'from the new leader');
    t.equal(run.attempts.at(-1)?.responseExcerpt, 'after the crash');
    granting.start();
  },
);

t.test(
  'a pause acknowledged while a run waits for a worker wins; no worker: retried',
  async (t) => {
    const sc = await SchedulerCluster.start(t);
    const slot = slotAhead(3000);
    // No worker of pool "lonely" yet: the runs wait on the leader for one (up to the 8 s deadline).
    await sc.createJob('lonely-paused', {
      schedule: `at ${iso(slot)}`,
      target: { url: 'worker:lonely' },
      attemptDeadlineMs: 8000,
    });
    await sc.createJob('lonely-kept', {
      schedule: `at ${iso(slot)}`,
      target: { url: 'worker:lonely' },
      attemptDeadlineMs: 8000,
    });
    await sc.createJob('nobody', {
      schedule: `at ${iso(slot)}`,
      target: { url: 'worker:nobody' },
      attemptDeadlineMs: 500,
      retry: { initialBackoffMs: 200, maxBackoffMs: 200, maxAttempts: 2 },
    });
    await sleep(Math.max(0, slot - Date.now()) + 500);
    await sc.cluster.scheduler({ op: 'pause-job', tenant: TENANT, jobId: 'lonely-paused' });
    t.pass('paused after the slot, while its run waited for a worker');
    const { worker, seen } = testWorker(sc, { pool: 'lonely', id: 'late' }, {});
    t.teardown(() => worker.stop());
    await worker.start();
    await sc.runOf('lonely-kept', slot, (r) => r.status === 'SUCCEEDED');
    t.pass('the worker that connected late took the run that kept waiting');
    await sleep(500);
    t.notOk(
      seen.some((s) => s.run.jobId === 'lonely-paused'),
      'the paused job was never leased',
    );
    const paused = await sc.runOf('lonely-paused', slot, (r) => r.status === 'SKIPPED');
    t.equal(paused.reason, 'paused', 'its slot is recorded SKIPPED (paused)');
    const dead = await sc.runOf('nobody', slot, (r) => r.status === 'DEAD');
    t.equal(dead.attempts.length, 2, 'with no worker at all, each attempt waits and fails');
    t.match(
      dead.attempts[0]?.error,
      /no worker of pool nobody connected to this node took the run/,
    );
  },
);

t.test(
  'tickctl worker --exec: payload on stdin, identity in the environment, exit codes',
  async (t) => {
    const sc = await SchedulerCluster.start(t);
    const out = mkdtempSync(join(tmpdir(), 'tickraft-worker-'));
    t.teardown(() => rmSync(out, { recursive: true, force: true }));
    await everyApiAddressRegistered(t, sc);
    const n0 = sc.cluster.nodes[0]!;
    const script =
      'if [ "$TICKRAFT_JOB_ID" = sh-fail ]; then exit 3; fi; ' +
      'cat > "$OUT/$TICKRAFT_JOB_ID.json"; echo "token=$TICKRAFT_FENCING_TOKEN attempt=$TICKRAFT_ATTEMPT"; ' +
      'echo "warned about $TICKRAFT_JOB_ID" >&2';
    const env = { ...process.env, OUT: out, TICKRAFT_TOKEN: TEST_ADMIN_TOKEN };
    const args = [
      ...['worker', '--endpoint', `${n0.host}:${n0.apiPort}`, '--pool', 'shell'],
      ...['--capacity', '2', '--exec', script, '--fail-exit', '3'],
    ];
    const child = spawn(...nodeCommand([TICKCTL, ...args], env), {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.teardown(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let text = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (text += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (text += c));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    await waitFor(() => {
      if (!/serving pool shell with capacity 2 per node on (\S+, ){2}\S+;/.test(text)) {
        throw new Error(`not serving yet: ${text}`);
      }
    }, 20_000);
    t.pass('tickctl worker connected to the three nodes');
    const slot = slotAhead(3000);
    await sc.createJob('sh-ok', {
      schedule: `at ${iso(slot)}`,
      target: { url: 'worker:shell' },
      payload: { invoice: 42 },
    });
    await sc.createJob('sh-fail', { schedule: `at ${iso(slot)}`, target: { url: 'worker:shell' } });
    const ok = await sc.runOf('sh-ok', slot, (r) => r.status === 'SUCCEEDED');
    t.same(
      JSON.parse(readFileSync(join(out, 'sh-ok.json'), 'utf8')),
      { invoice: 42 },
      'the command read the payload on stdin',
    );
    t.equal(
      ok.attempts[0]?.responseExcerpt,
      `token=${ok.attempts[0]!.token} attempt=1\n`,
      "the command's stdout is kept, with the fencing token it was given",
    );
    const failed = await sc.runOf('sh-fail', slot, (r) => r.status === 'DEAD');
    t.equal(failed.attempts.length, 1, 'an exit code listed in --fail-exit is not retried');
    t.match(failed.attempts[0]?.error, /exit 3/);
    t.match(text, /lease {2}job sh-ok {2}fire acme\/sh-ok:\d+/, 'each lease is printed');
    t.match(
      text,
      /^\S+ {2}stdout fire acme\/sh-ok:\d+ {2}token=\d+ attempt=1$/m,
      "the command's stdout is shown, labelled with its fire id",
    );
    t.match(
      text,
      /^\S+ {2}stderr fire acme\/sh-ok:\d+ {2}warned about sh-ok$/m,
      'and its stderr, labelled the same way',
    );
    t.notMatch(text, /^warned about/m, 'no unlabelled output');
    child.kill('SIGTERM');
    t.equal(await exited, 0, 'SIGTERM stops it with exit 0');
    t.match(text, /stopped \(SIGTERM\)/);
  },
);
