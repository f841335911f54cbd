// Workflows on a real 3-node cluster: a trigger with its own payload and headers, a webhook
// that answers 202 and completes the run later (CompleteRun, Heartbeat, the deadline), across a
// kill -9 of the group's leader with a deposed attempt's completion refused, and a run's whole
// lifecycle seen through WatchRuns and `tickctl runs watch`.
import t from 'tap';
import { status as grpcStatus } from '@grpc/grpc-js';
import { ApiCallError, type ApiClient } from '../../src/api/client.js';
import { ApiCluster, endpointOf, leadersSettled, TENANT } from '../helpers/api-cluster.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { eventually, sleep } from '../helpers/cluster.js';
import { runTickctl } from '../helpers/tickctl.js';
import type { Receipt } from '../helpers/webhook-sink.js';
import { hashShardKey } from '../../src/placement/hash.js';
import { jobKeyOf } from '../../src/scheduler/job-key.js';

type Obj = Record<string, unknown>;

async function refusal(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiCallError)
      return { code: grpcStatus[err.status] ?? String(err.status), message: err.message };
    throw err;
  }
  throw new Error('the call was not refused');
}

/** A read, so asked again as a careful client does while a group's leadership settles. */
function getRun(c: ApiClient, fireId: string): Promise<Obj> {
  return retryUnavailable(() => c.call<Obj>('RunService', 'GetRun', { tenant: TENANT, fireId }));
}

async function triggered(c: ApiClient, jobId: string, extra: Obj = {}): Promise<string> {
  const res = await c.call<Obj>('JobService', 'TriggerJob', { tenant: TENANT, jobId, ...extra });
  return String((res['run'] as Obj)['fireId']);
}

/**
 * Waits until the run's last attempt is recorded as accepted (its 202 committed): RUNNING alone
 * also shows while the request is still in flight.
 */
async function acceptedRun(c: ApiClient, fireId: string, attempt = 1): Promise<Obj> {
  return eventually(async () => {
    const r = await getRun(c, fireId);
    const last = (r['attempts'] as Obj[] | undefined)?.at(-1);
    if (
      r['status'] !== 'RUN_STATUS_RUNNING' ||
      last?.['attempt'] !== attempt ||
      last['outcome'] !== 'ATTEMPT_OUTCOME_ACCEPTED'
    )
      throw new Error(`${fireId}: attempt ${attempt}'s 202 is not recorded yet`);
    return r;
  }, 20_000);
}

function receiptsOf(ac: ApiCluster, fireId: string): Receipt[] {
  return ac.sink.receipts.filter((r) => r.fireId === fireId);
}

/** Waits until the sink has `n` requests of the fire id. */
function received(ac: ApiCluster, fireId: string, n = 1): Promise<void> {
  return eventually(
    () =>
      receiptsOf(ac, fireId).length >= n
        ? Promise.resolve()
        : Promise.reject(new Error(`${fireId}: fewer than ${n} requests received`)),
    20_000,
  );
}

t.test('workflows on a real cluster', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const c = ac.client('n1');
  ac.sink.behaviour = (r) => {
    if (r.path.startsWith('/async')) return 202;
    if (r.path.startsWith('/held')) return 'hold';
    if (r.path.startsWith('/flaky')) return r.attempt === 1 ? 503 : { delayMs: 1500 };
    return 'ok';
  };
  // Every node: a command still finds one while a test has killed another.
  const endpoints = ac.cluster.nodes.map(endpointOf).join(',');
  const tickctl = (args: string[], token?: string): ReturnType<typeof runTickctl> =>
    runTickctl(args, {
      t,
      env: {
        ...process.env,
        TICKCTL_ENDPOINTS: endpoints,
        ...(token === undefined ? {} : { TICKRAFT_TOKEN: token }),
      },
    });
  const create = (jobId: string, spec: Obj): Promise<unknown> =>
    c.call('JobService', 'CreateJob', { jobId, spec: ac.spec({ schedule: 'every 1h', ...spec }) });

  t.test('a trigger sends its own payload and headers; the job keeps its own', async (t) => {
    await create('report', {
      schedule: '0 * * * *',
      payloadJson: '{"range":"day"}',
      target: { url: `${ac.sink.url}/hook`, headers: { 'X-Team': 'a', 'X-Keep': 'k' } },
    });
    const out = await tickctl([
      'jobs',
      'trigger',
      'report',
      '--tenant',
      TENANT,
      '--payload',
      '{"range":"week"}',
      '--header',
      'x-team=b',
      '--header',
      'X-Extra=1',
    ]);
    t.equal(out.code, 0, out.stderr);
    const fireId = /run (\S+)/.exec(out.stdout)?.[1] ?? '';
    await received(ac, fireId);
    const got = receiptsOf(ac, fireId)[0]!;
    t.same(got.body['payload'], { range: 'week' }, "the trigger's payload was sent");
    t.equal(got.headers['x-team'], 'b', 'a header of the job replaced (its name in any case)');
    t.equal(got.headers['x-extra'], '1', 'a header added');
    t.equal(got.headers['x-keep'], 'k', "the job's other headers stay");
    t.ok(got.signatureOk, 'signed as any delivery');
    const run = await getRun(c, fireId);
    t.equal(run['payloadJson'], '{"range":"week"}', 'GetRun shows the payload of the run');
    t.same(run['headerNames'], ['x-team', 'X-Extra'], 'and the names of its headers, not values');
    const plain = await triggered(c, 'report');
    await received(ac, plain);
    t.same(receiptsOf(ac, plain)[0]!.body['payload'], { range: 'day' }, "then the job's own");

    const runsBefore = (
      (await c.call<Obj>('RunService', 'ListRuns', { tenant: TENANT, jobId: 'report' }))[
        'runs'
      ] as Obj[]
    ).length;
    const bad = await refusal(triggered(c, 'report', { payloadJson: '{not json' }));
    t.equal(bad.code, 'INVALID_ARGUMENT');
    t.match(bad.message, /payload_json: must be JSON text/);
    const reserved = await refusal(
      triggered(c, 'report', { headers: { 'Tickraft-Attempt': '9' } }),
    );
    t.match(reserved.message, /headers\.Tickraft-Attempt: names starting tickraft- .* reserved/);
    const typo = await tickctl([
      'jobs',
      'trigger',
      'report',
      '--tenant',
      TENANT,
      '--header',
      'novalue',
    ]);
    t.equal(typo.code, 2, 'tickctl: a --header without = is a usage error');
    t.match(typo.stderr, /--header: 'novalue' is not name=value/);
    const runsAfter = (
      (await c.call<Obj>('RunService', 'ListRuns', { tenant: TENANT, jobId: 'report' }))[
        'runs'
      ] as Obj[]
    ).length;
    t.equal(runsAfter, runsBefore, 'a refused trigger creates no run');

    const from = Date.now() - 3 * 3600_000;
    const bf = await c.call<Obj>('JobService', 'BackfillJob', {
      tenant: TENANT,
      jobId: 'report',
      fromMs: from,
      toMs: from + 2 * 3600_000,
      payloadJson: '{"backfill":true}',
    });
    const slots = bf['slotsMs'] as number[];
    t.equal(slots.length, 2, 'a backfill of two slots');
    for (const s of slots) await received(ac, `${TENANT}/report:${s}`);
    for (const s of slots)
      t.same(receiptsOf(ac, `${TENANT}/report:${s}`)[0]!.body['payload'], { backfill: true });
  });

  t.test('202: RUNNING until the receiver completes it; only its own token may', async (t) => {
    await create('export', {
      target: { url: `${ac.sink.url}/async`, completionTimeoutMs: 60_000 },
    });
    const fireId = await triggered(c, 'export');
    const run = await acceptedRun(c, fireId);
    const attempt = (run['attempts'] as Obj[])[0]!;
    t.equal(attempt['outcome'], 'ATTEMPT_OUTCOME_ACCEPTED', 'the attempt was accepted');
    t.equal(attempt['statusCode'], 202);
    t.match(attempt['nodeId'], /^n[123]$/, 'the attempt names the node that sent it');
    const token = receiptsOf(ac, fireId)[0]!.token;
    t.equal(attempt['fencingToken'], token);
    t.ok(
      Math.abs(Number(run['completeByMs']) - (Number(attempt['startedAtMs']) + 60_000)) < 5_000,
      'its deadline is the completion timeout after the send',
    );

    const stale = await refusal(
      c.call('RunService', 'CompleteRun', {
        tenant: TENANT,
        fireId,
        fencingToken: token - 1,
        outcome: 'ATTEMPT_OUTCOME_SUCCESS',
      }),
    );
    t.equal(stale.code, 'FAILED_PRECONDITION', 'a token not of the current attempt');
    t.match(stale.message, /fencing token/);
    const hb = await c.call<Obj>('RunService', 'Heartbeat', {
      tenant: TENANT,
      fireId,
      fencingToken: token,
      extendMs: 120_000,
    });
    t.ok(Number(hb['completeByMs']) > Number(run['completeByMs']), 'a heartbeat moves it');
    const badExtend = await refusal(
      c.call('RunService', 'Heartbeat', {
        tenant: TENANT,
        fireId,
        fencingToken: token,
        extendMs: 5,
      }),
    );
    t.match(badExtend.message, /extend_ms: must be an integer in \[1000, 604800000\]/);

    /** `tickctl runs complete` of this run's accepted attempt, with a new token of `role`. */
    const completeAs = async (
      role: string,
      extra: string[] = [],
    ): Promise<Awaited<ReturnType<typeof tickctl>>> => {
      const made = await c.call<Obj>('TokenService', 'CreateToken', { tenant: TENANT, role });
      const args = ['runs', 'complete', fireId, '--tenant', TENANT, '--token', String(token)];
      return tickctl([...args, '--outcome', 'success', ...extra], String(made['token']));
    };
    const asReader = await completeAs('reader');
    t.equal(asReader.code, 6, 'a reader token may not complete a run');
    const done = await completeAs('worker', ['--output', 'exported 42 rows']);
    t.equal(done.code, 0, done.stderr);
    t.match(done.stdout, `${fireId}: SUCCEEDED`);
    const finished = await getRun(c, fireId);
    t.equal(finished['status'], 'RUN_STATUS_SUCCEEDED');
    t.equal((finished['attempts'] as Obj[])[0]!['responseExcerpt'], 'exported 42 rows');
    const twice = await refusal(
      c.call('RunService', 'CompleteRun', {
        tenant: TENANT,
        fireId,
        fencingToken: token,
        outcome: 'ATTEMPT_OUTCOME_FAIL',
      }),
    );
    t.equal(twice.code, 'FAILED_PRECONDITION', 'a finished run is not completed again');
    t.equal((await getRun(c, fireId))['status'], 'RUN_STATUS_SUCCEEDED', 'and stays SUCCEEDED');
    const badOutcome = await tickctl([
      'runs',
      'complete',
      fireId,
      '--tenant',
      TENANT,
      '--token',
      '1',
      '--outcome',
      'done',
    ]);
    t.equal(badOutcome.code, 2, 'tickctl: an unknown --outcome is a usage error');
  });

  t.test(
    'across a kill -9 of the leader: the deadline holds, a deposed token is refused',
    async (t) => {
      await create('sync', {
        target: { url: `${ac.sink.url}/async`, completionTimeoutMs: 4_000 },
        retry: { maxAttempts: 3, initialBackoffMs: 200, maxBackoffMs: 200 },
      });
      const job = await c.call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId: 'sync' });
      const groupId = Number(job['groupId']);
      const fireId = await triggered(c, 'sync');
      await acceptedRun(c, fireId);
      const first = receiptsOf(ac, fireId)[0]!;
      const leader = (await ac.leaders()).get(groupId)!;
      await ac.cluster.node(leader).kill9();
      const survivor = ac.cluster.nodes.find((n) => n.id !== leader)!;
      const s = ac.client(survivor.id);
      t.teardown(() => {
        if (!ac.cluster.node(leader).running) ac.cluster.node(leader).start();
      });
      // Nobody completes it: the new leader lets the deadline pass and retries the run.
      await received(ac, fireId, 2);
      const second = receiptsOf(ac, fireId)[1]!;
      t.equal(second.attempt, 2, 'the retry is attempt 2');
      t.ok(second.token > first.token, 'with a higher fencing token');
      t.ok(second.term > first.term, 'from a later term: the new leader expired the deadline');
      // Attempt 2's 202 recorded: the run is RUNNING again, now with attempt 2's token.
      const run = await acceptedRun(s, fireId, 2);
      const deposed = await refusal(
        s.call('RunService', 'CompleteRun', {
          tenant: TENANT,
          fireId,
          fencingToken: first.token,
          outcome: 'ATTEMPT_OUTCOME_SUCCESS',
        }),
      );
      t.equal(deposed.code, 'FAILED_PRECONDITION', "the deposed attempt's completion is refused");
      t.match(deposed.message, /attempt 1.*attempt 2/);
      const attempts = run['attempts'] as Obj[];
      t.match(attempts[0]!['error'], /COMPLETION_TIMEOUT/, 'attempt 1 records why it ended');
      const ok = await s.call<Obj>('RunService', 'CompleteRun', {
        tenant: TENANT,
        fireId,
        fencingToken: second.token,
        outcome: 'ATTEMPT_OUTCOME_SUCCESS',
      });
      t.equal(ok['status'], 'RUN_STATUS_SUCCEEDED', "the current attempt's completion is taken");
      ac.cluster.node(leader).start();
      await ac.cluster.waitReady(60_000);
      // Leader balancing hands the groups back to the restarted node: let that finish first.
      await leadersSettled(c, 30_000);
    },
  );

  t.test(
    'every lifecycle transition is seen through WatchRuns and tickctl runs watch',
    async (t) => {
      await create('flaky', {
        schedule: '0 0 1 1 *',
        target: { url: `${ac.sink.url}/flaky` },
        retry: { maxAttempts: 3, initialBackoffMs: 1000, maxBackoffMs: 1000 },
      });
      const seen: [string, string][] = [];
      const stop = new AbortController();
      const watching = c.stream<Obj>(
        'RunService',
        'WatchRuns',
        { tenant: TENANT, jobId: 'flaky' },
        (ev) => {
          const run = ev['run'] as Obj;
          seen.push([
            String(run['fireId']),
            `${String(ev['kind'])} ${String(run['status']).replace('RUN_STATUS_', '')}`,
          ]);
        },
        stop.signal,
      );
      const cli = tickctl(['runs', 'watch', 'flaky', '--tenant', TENANT, '--for', '9s', '--json']);
      await sleep(1000);
      const fireId = await triggered(c, 'flaky');
      await eventually(async () => {
        if ((await getRun(c, fireId))['status'] !== 'RUN_STATUS_SUCCEEDED')
          throw new Error('not yet');
      }, 15_000);
      await sleep(300);
      stop.abort();
      await watching;
      const changes = seen
        .filter(([id, what]) => id === fireId && what.startsWith('CHANGED'))
        .map(([, what]) => what);
      t.same(
        changes.filter((s, i) => s !== changes[i - 1]),
        [
          'CHANGED SCHEDULED',
          'CHANGED RUNNING',
          'CHANGED FAILED',
          'CHANGED RUNNING',
          'CHANGED SUCCEEDED',
        ],
        'SCHEDULED → RUNNING → FAILED (503, retried) → RUNNING (answered after 1.5 s) → SUCCEEDED',
      );
      const out = await cli;
      t.equal(out.code, 0, `--for ends the watch with exit 0: ${out.stderr}`);
      const statuses = out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Obj)
        .filter((e) => (e['run'] as Obj)['fireId'] === fireId)
        .map((e) => String((e['run'] as Obj)['status']).replace('RUN_STATUS_', ''));
      const all = ['SCHEDULED', 'RUNNING', 'FAILED', 'RUNNING', 'SUCCEEDED'];
      if (!out.stderr.includes('watching again')) t.same(statuses, all, 'tickctl too');
      else {
        // The group's leader moved while it watched: the new leader's first messages give the
        // run as it is then, so a state passed meanwhile may not show; the order still holds.
        t.equal(statuses.at(-1), 'SUCCEEDED', 'tickctl, across a leader change: the end');
        t.ok(
          statuses.every((st, i) => i === 0 || all.indexOf(st, all.indexOf(statuses[i - 1]!)) >= 0),
          `in order: ${statuses.join(' → ')}`,
        );
      }
      const missing = await tickctl(['runs', 'watch', 'no-such-job', '--tenant', TENANT]);
      t.equal(missing.code, 3, 'watching a job that does not exist: not found');
    },
  );

  t.test('a DAG of three jobs fires in order across a kill -9 of a leader', async (t) => {
    const every = '*/4 * * * * *';
    await create('extract', { schedule: every, target: { url: `${ac.sink.url}/dag` } });
    await create('transform', {
      schedule: every,
      dependsOn: ['extract'],
      target: { url: `${ac.sink.url}/dag` },
    });
    await create('load', {
      schedule: every,
      dependsOn: ['transform'],
      target: { url: `${ac.sink.url}/dag` },
    });
    const cycle = await refusal(
      c.call('JobService', 'UpdateJob', {
        tenant: TENANT,
        jobId: 'extract',
        spec: ac.spec({
          schedule: every,
          dependsOn: ['load'],
          target: { url: `${ac.sink.url}/dag` },
        }),
      }),
    );
    t.equal(cycle.code, 'INVALID_ARGUMENT', 'a cycle is refused');
    t.match(
      cycle.message,
      /spec\.depends_on\[0\]: makes a cycle: "extract" → "load" → "transform" → "extract"/,
    );
    const unknown = await refusal(create('orphan', { dependsOn: ['no-such-job'] }));
    t.match(unknown.message, /depends_on\[0\]: tenant acme has no job "no-such-job"/);
    const self = await refusal(create('narcissus', { dependsOn: ['narcissus'] }));
    t.match(self.message, /a job cannot depend on itself/);
    const bulk = await refusal(
      c.call('JobService', 'CreateJobs', {
        jobs: [{ jobId: 'bulk-dep', spec: ac.spec({ dependsOn: ['extract'] }) }],
      }),
    );
    t.match(
      bulk.message,
      /jobs\[0\]\.spec\.depends_on: CreateJobs takes no jobs with dependencies/,
    );

    const groupOf = async (jobId: string): Promise<number> =>
      Number((await c.call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId }))['groupId']);
    await sleep(9_000);
    const victim = (await ac.leaders()).get(await groupOf('transform'))!;
    const killedAt = Date.now();
    await ac.cluster.node(victim).kill9();
    t.teardown(() => {
      if (!ac.cluster.node(victim).running) ac.cluster.node(victim).start();
    });
    await sleep(12_000);
    const accepted = (jobId: string): Receipt[] =>
      ac.sink.receipts.filter((r) => r.jobId === jobId && r.path.startsWith('/dag'));
    const slotsOf = (jobId: string): Set<number> => new Set(accepted(jobId).map((r) => r.slotMs));
    const loaded = [...slotsOf('load')].sort((a, b) => a - b);
    t.ok(loaded.length >= 4, `load ran for ${loaded.length} slots`);
    t.ok(
      loaded.some((s) => s > killedAt),
      'slots after the kill went through the whole DAG too',
    );
    for (const s of loaded) {
      const first = (jobId: string): Receipt | undefined =>
        accepted(jobId).find((r) => r.slotMs === s && r.status === 200);
      const e = first('extract');
      const tr = accepted('transform').filter((r) => r.slotMs === s);
      const l = accepted('load').filter((r) => r.slotMs === s);
      t.ok(e !== undefined, `slot ${s}: extract succeeded`);
      t.ok(
        tr.length > 0 && tr[0]!.atMs >= e!.atMs,
        `slot ${s}: transform sent after extract succeeded`,
      );
      t.ok(l[0]!.atMs >= tr.find((r) => r.status === 200)!.atMs, `slot ${s}: load after transform`);
    }
    const graph = await tickctl(['jobs', 'graph', '--tenant', TENANT]);
    t.equal(graph.code, 0, graph.stderr);
    const lines = graph.stdout.trim().split('\n');
    t.match(lines[0], /^JOB\s+DEPENDS ON\s+LAST SLOT\s+STATUS/);
    t.same(
      lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2)),
      [
        ['extract', '-'],
        ['transform', 'extract'],
        ['load', 'transform'],
      ],
      'upstreams first, each with its upstreams',
    );
    const survivor = ac.client(ac.cluster.nodes.find((n) => n.id !== victim)!.id);
    for (const jobId of ['extract', 'transform', 'load'])
      await survivor.call('JobService', 'PauseJob', { tenant: TENANT, jobId });
    ac.cluster.node(victim).start();
    await ac.cluster.waitReady(60_000);
    // Leader balancing hands the groups back to the restarted node: let that finish first.
    await leadersSettled(ac.client(ac.cluster.nodes[2]!.id), 30_000);
  });

  t.test('a waiting dependent run settles once across a split of both groups', async (t) => {
    const status = await c.call<Obj>('AdminService', 'ClusterStatus', {});
    const groups = (status['groups'] as Obj[]).filter((g) => g['groupId'] !== 0);
    // Ids in the upper half of their group's range: the split moves them to the new groups.
    const movedId = (prefix: string): string => {
      for (let i = 0; ; i++) {
        const id = `${prefix}-${i}`;
        const h = hashShardKey(jobKeyOf(TENANT, id));
        const g = groups.find((x) => Number(x['rangeStart']) <= h && h < Number(x['rangeEnd']))!;
        const mid = Number(g['rangeStart']) + (Number(g['rangeEnd']) - Number(g['rangeStart'])) / 2;
        if (h >= mid) return id;
      }
    };
    const up = movedId('up');
    const down = movedId('down');
    const slot = Math.ceil((Date.now() + 4000) / 1000) * 1000;
    const at = `at ${new Date(slot).toISOString()}`;
    await create(up, { schedule: at, target: { url: `${ac.sink.url}/held` } });
    await create(down, { schedule: at, dependsOn: [up], target: { url: `${ac.sink.url}/dag` } });
    await received(ac, `${TENANT}/${up}:${slot}`);
    const downFire = `${TENANT}/${down}:${slot}`;
    t.equal((await getRun(c, downFire))['status'], 'RUN_STATUS_SCHEDULED', 'the downstream waits');
    for (const g of groups) {
      const r = await tickctl(['cluster', 'split', '--group', String(g['groupId'])]);
      t.equal(r.code, 0, `group ${String(g['groupId'])} split: ${r.stderr}`);
    }
    // The new groups may still be electing (or handing back) their first leaders.
    const moved = await retryUnavailable(() =>
      c.call<Obj>('JobService', 'GetJob', { tenant: TENANT, jobId: down }),
    );
    t.ok(
      Number(moved['groupId']) > 2,
      `the downstream now lives in group ${String(moved['groupId'])}`,
    );
    await sleep(1500);
    t.equal(receiptsOf(ac, downFire).length, 0, 'still waiting after the splits');
    for (const res of ac.sink.held.splice(0)) res.writeHead(200).end('ok');
    await received(ac, downFire);
    await sleep(2500);
    t.equal(receiptsOf(ac, downFire).length, 1, 'sent once');
    const run = await getRun(c, downFire);
    t.equal(run['status'], 'RUN_STATUS_SUCCEEDED');
  });
});
