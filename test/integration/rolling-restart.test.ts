// A rolling restart under load, the way an operator runs it: `npm start` brings the cluster up,
// jobs of both delivery semantics fire every second to a webhook sink, `npm run
// rolling-restart` restarts every node in turn (drain, stop, start, catch up), and afterwards
// every slot of the window was delivered exactly once: no duplicate, no skipped slot; and every
// data group is led by the node that led it before (leader balancing gives the groups back).
// All of it with the CPU contended: one busy-loop process per core runs beside the cluster, as
// on a loaded machine, where leader balancing once handed a group back to a node that had just
// exited and the group planned nothing until that node returned (a slot MISSED, the next late).
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiClient } from '../../src/api/client.js';
import { leadersSettled } from '../helpers/api-cluster.js';
import { freePort, randomLoopbackHost, sleep, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import { nodeCommand } from '../helpers/node-child.js';
import { localClusterEnv } from '../helpers/local-cluster-env.js';
import { TEST_SECRET, WebhookSink } from '../helpers/webhook-sink.js';

const START = fileURLToPath(new URL('../../cluster/start.ts', import.meta.url));
const ROLLING = fileURLToPath(new URL('../../cluster/rolling-restart.ts', import.meta.url));
const JOBS = 6;

function collect(child: ChildProcess): { text: () => string } {
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { text: () => out };
}

/** Group id → leader node ('' while none), for every data group, as ClusterStatus reports. */
async function dataLeaders(client: ApiClient): Promise<Record<string, string>> {
  const cs = await client.call<Record<string, unknown>>('AdminService', 'ClusterStatus', {});
  const out: Record<string, string> = {};
  for (const g of cs['groups'] as Record<string, unknown>[])
    if (Number(g['groupId']) !== 0)
      out[String(g['groupId'])] = typeof g['leader'] === 'string' ? g['leader'] : '';
  return out;
}

/** One busy-loop process per core, killed (and waited for) in teardown. */
function contendCpu(t: Test): ChildProcess[] {
  const hogs = Array.from({ length: availableParallelism() }, () =>
    spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
  );
  t.teardown(async () => {
    await Promise.all(
      hogs.map((h) =>
        h.exitCode !== null || h.signalCode !== null
          ? Promise.resolve()
          : new Promise<void>((r) => {
              h.once('exit', () => r());
              h.kill('SIGKILL');
            }),
      ),
    );
  });
  return hogs;
}

t.test('rolling restart under CPU load: no slot twice, skipped or missed', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'tickraft-rolling-'));
  // npm start keeps an admin token it finds in its home rather than making one.
  writeFileSync(join(home, 'admin.token'), `${TEST_ADMIN_TOKEN}\n`, { mode: 0o600 });
  const host = randomLoopbackHost();
  const api = await freePort(host);
  const peer = await freePort(host);
  const metrics = await freePort(host);
  const env = localClusterEnv({ home, host, api, peer, metrics });
  const sink = new WebhookSink([TEST_SECRET]);
  await sink.start();
  const cluster = spawn(...nodeCommand(['--import', 'tsx', START], env), {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = collect(cluster);
  const exited = new Promise<number | null>((r) => cluster.on('exit', (code) => r(code)));
  const client = new ApiClient(`${host}:${api}`, 10_000, {}, { token: TEST_ADMIN_TOKEN });
  t.teardown(async () => {
    client.close();
    if (cluster.exitCode === null) cluster.kill('SIGINT');
    await exited;
    await sink.close();
    rmSync(home, { recursive: true, force: true });
  });

  const deadline = Date.now() + 90_000;
  while (!out.text().includes('Ctrl-C stops the cluster') && Date.now() < deadline) {
    if (cluster.exitCode !== null) break;
    await sleep(100);
  }
  t.match(out.text(), /3 nodes ready/, 'the cluster is up');
  t.match(out.text(), /npm run rolling-restart/, 'npm start mentions the rolling restart');

  await leadersSettled(client);
  const hogs = contendCpu(t);
  t.comment(`CPU contention: ${hogs.length} busy-loop processes`);
  await client.call('TenantService', 'CreateTenant', {
    tenantId: 'acme',
    signingSecret: TEST_SECRET,
  });
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) {
    const jobId = `roll-${i}`;
    ids.push(jobId);
    await client.call('JobService', 'CreateJob', {
      jobId,
      spec: {
        tenant: 'acme',
        schedule: '* * * * * *',
        target: { url: `${sink.url}/hook` },
        delivery:
          i % 2 === 0 ? 'DELIVERY_SEMANTICS_AT_MOST_ONCE' : 'DELIVERY_SEMANTICS_AT_LEAST_ONCE',
        // Half fire every late slot, half coalesce a slot later than the misfire threshold into
        // the next one and record it MISSED: either way a slot planned late shows.
        misfire: {
          policy: i < JOBS / 2 ? 'MISFIRE_POLICY_FIRE_ALL' : 'MISFIRE_POLICY_FIRE_ONCE',
        },
      },
    });
  }
  await sleep(3000);
  // Where each data group's leadership is once it stopped moving (start-up balancing is over):
  // the same view twice in a row, a second apart.
  let leadersBefore = await dataLeaders(client);
  for (let tries = 0; tries < 30; tries++) {
    await sleep(1000);
    const again = await dataLeaders(client);
    const same = JSON.stringify(again) === JSON.stringify(leadersBefore);
    leadersBefore = again;
    if (same && !Object.values(again).includes('')) break;
  }
  const windowStartMs = Math.ceil(Date.now() / 1000) * 1000;

  const rolling = spawn(...nodeCommand(['--import', 'tsx', ROLLING], env), {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const rollOut = collect(rolling);
  const rollCode = await new Promise<number | null>((r) => rolling.on('exit', (code) => r(code)));
  t.comment(rollOut.text().trim());
  t.equal(rollCode, 0, 'rolling-restart exits 0');
  for (const id of ['n1', 'n2', 'n3']) {
    t.match(
      rollOut.text(),
      new RegExp(`${id}: caught up in \\d+ ms`),
      `${id} restarted and caught up`,
    );
  }
  t.match(rollOut.text(), /done: 3 nodes in [\d.]+ s, \d+ leaderships handed over/);
  const windowEndMs = Math.floor(Date.now() / 1000) * 1000;

  // Let the last slots of the window arrive, then stop the jobs.
  await sleep(3000);
  for (const jobId of ids) await client.call('JobService', 'PauseJob', { tenant: 'acme', jobId });

  let missed = 0;
  for (const jobId of ids) {
    const res = await client.call<{ runs?: unknown[] }>('RunService', 'ListRuns', {
      tenant: 'acme',
      jobId,
      status: 'RUN_STATUS_MISSED',
      pageSize: 1000,
    });
    missed += res.runs?.length ?? 0;
  }
  let duplicates = 0;
  let skipped = 0;
  let worstLagMs = 0;
  for (const jobId of ids) {
    const receipts = sink.of(jobId);
    const bySlot = new Map<number, number>();
    for (const r of receipts) bySlot.set(r.slotMs, (bySlot.get(r.slotMs) ?? 0) + 1);
    for (const [, n] of bySlot) if (n > 1) duplicates += n - 1;
    for (let slot = windowStartMs; slot <= windowEndMs; slot += 1000) {
      if (!bySlot.has(slot)) skipped++;
    }
    for (const r of receipts) {
      if (r.slotMs >= windowStartMs && r.slotMs <= windowEndMs)
        worstLagMs = Math.max(worstLagMs, r.atMs - r.slotMs);
    }
  }
  // Each node hands its groups away while it stops; once back, leader balancing gives them
  // back, also the groups with no jobs, which have quiesced meanwhile.
  const deadlineBack = Date.now() + 30_000;
  let leadersAfter = await dataLeaders(client);
  while (
    JSON.stringify(leadersAfter) !== JSON.stringify(leadersBefore) &&
    Date.now() < deadlineBack
  ) {
    await sleep(500);
    leadersAfter = await dataLeaders(client);
  }
  t.same(leadersAfter, leadersBefore, 'every data group is led where it was before the restarts');

  const slots = ((windowEndMs - windowStartMs) / 1000 + 1) * JOBS;
  t.ok(slots >= JOBS * 5, `the window spans the restarts: ${slots} slots`);
  t.equal(duplicates, 0, 'no slot delivered twice');
  t.equal(skipped, 0, 'no slot skipped');
  t.equal(missed, 0, 'no run recorded MISSED');
  t.comment(
    `rolling restart under CPU contention: ${slots} slots in the window, ${duplicates} duplicates, ` +
      `${skipped} skipped, ${missed} MISSED, largest delay ${worstLagMs} ms`,
  );
});
