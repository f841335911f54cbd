/**
 * Failover, for `npm run bench`: `jobs` every-second cron jobs (misfire fire_all, so every slot
 * must fire however late) all in one data group of a real 3-process cluster, delivered to a sink
 * process that records every receipt. Once they fire steadily, the process leading that group is
 * killed with SIGKILL. Figures: the time from the kill until the group fires again (the first
 * receipt of a slot due after the kill), the time until another node leads the group, the slots
 * of the window delivered more than 1 s late, and the slots lost: every slot of every job from
 * just after creation to 6 s after the kill must reach the sink, and any that never does is lost.
 */
import { ApiCallError, type ApiClient } from '../src/api/client.js';
import { META_GROUP_ID } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';
import { termOfToken } from '../src/scheduler/dispatcher.js';
import { ProcCluster, sleep, type ProcNode } from '../test/helpers/cluster.js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { apiClients, settleLeaders } from './bench-cluster.js';
import { fmt } from './figures.js';
import { createBatch } from './registration.js';
import { startSinkProcess } from './sink-process.js';

/** Records [fire id, receipt ms, fencing token] of every request; GET /receipts returns them. */
const SINK_SOURCE = `
const http = require('node:http');
const receipts = [];
const server = http.createServer((req, res) => {
  if (req.url === '/receipts') { res.end(JSON.stringify(receipts)); return; }
  req.resume();
  req.on('end', () => {
    receipts.push([req.headers['idempotency-key'], Date.now(), Number(req.headers['tickraft-fencing-token'])]);
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

export interface FailoverOptions {
  readonly jobs: number;
  readonly groups: number;
  readonly nodeFlags?: readonly string[];
  readonly log?: (line: string) => void;
}

export interface FailoverResult {
  readonly jobs: number;
  readonly groupId: number;
  readonly killedNode: string;
  readonly newLeader: string;
  /** Kill → another node says it leads the group. */
  readonly electedMs: number;
  /** Kill → the first receipt of a slot due after the kill. */
  readonly resumeMs: number;
  /** Slots (job × second) that had to fire in the window. */
  readonly expectedSlots: number;
  readonly lostSlots: number;
  /** Slots of the window received more than 1 s after their time, from the kill on. */
  readonly delayedSlots: number;
  /** The same before the kill: a loaded machine shows here. */
  readonly delayedBeforeKill: number;
  /** Receipts beyond the first of a slot (at-least-once redeliveries). */
  readonly duplicates: number;
  readonly windowSeconds: number;
  readonly lagP99AfterKillMs: number;
  /** Creating the jobs failed (the figures above are then void). */
  readonly error: string | undefined;
}

/** `count` job ids that all hash into one data group. */
function idsInOneGroup(groups: number, count: number): { groupId: number; ids: string[] } {
  const ranges = splitRing(groups, META_GROUP_ID + 1);
  // The ring hashes a job's key, <tenant>/<job id>.
  const groupOf = (id: string): number => lookupRange(ranges, hashShardKey(`busy/${id}`)).groupId;
  const groupId = groupOf('busy-0');
  const ids: string[] = [];
  for (let i = 0; ids.length < count; i++)
    if (groupOf(`busy-${i}`) === groupId) ids.push(`busy-${i}`);
  return { groupId, ids };
}

async function leaderOf(
  cluster: ProcCluster,
  groupId: number,
): Promise<{ node: ProcNode; term: number } | undefined> {
  for (const n of cluster.nodes.filter((x) => x.running)) {
    const st = await n.status(1000).catch(() => undefined);
    const g = st?.groups.find((x) => x.groupId === groupId);
    if (g?.role === 'leader') return { node: n, term: g.term };
  }
  return undefined;
}

export async function runFailover(opts: FailoverOptions): Promise<FailoverResult> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const sink = await startSinkProcess(SINK_SOURCE);
  const cluster = await ProcCluster.create({
    groups: opts.groups,
    extraArgs: [...(opts.nodeFlags ?? [])],
  });
  let clients: ApiClient[] = [];
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    clients = await apiClients(cluster);
    await clients[0]!.call('TenantService', 'CreateTenant', {
      tenantId: 'busy',
      signingSecret: TEST_SECRET,
    });
    await settleLeaders(cluster, opts.groups);
    const { groupId, ids } = idsInOneGroup(opts.groups, opts.jobs);
    const jobs = ids.map((jobId) => ({
      jobId,
      spec: {
        tenant: 'busy',
        schedule: '* * * * * *',
        target: { url: `${sink.origin}/hook` },
        misfire: { policy: 'MISFIRE_POLICY_FIRE_ALL' },
      },
    }));
    try {
      for (let i = 0; i < jobs.length; i += 1000)
        await createBatch(clients[(i / 1000) % clients.length]!, jobs.slice(i, i + 1000));
    } catch (err) {
      const error = `creating the busy group's jobs failed: ${err instanceof ApiCallError ? `${err.code} ${err.message}` : String(err)}`;
      return void0(opts.jobs, groupId, error);
    }
    // Every job's first slot is at or after its creation: from the next second on, all fire.
    const windowStartMs = Math.ceil(Date.now() / 1000) * 1000 + 1000;
    while (Date.now() < windowStartMs + 4000) await sleep(50);
    const before = await leaderOf(cluster, groupId);
    if (!before) return void0(opts.jobs, groupId, `group ${groupId} has no leader before the kill`);
    log(
      `  failover: ${fmt(opts.jobs)} every-second jobs in group ${groupId}, led by ${before.node.id} (term ${before.term}); kill -9`,
    );
    const killMs = Date.now();
    await before.node.kill9();
    let after: { node: ProcNode; term: number } | undefined;
    for (;;) {
      after = await leaderOf(cluster, groupId);
      if (after && after.term > before.term) break;
      if (Date.now() > killMs + 60_000) break;
      await sleep(20);
    }
    const electedMs = Date.now() - killMs;
    let tracing = process.env['BENCH_TRACE'] === '1';
    if (tracing)
      void (async () => {
        for (let t = 0; t < 40 && tracing; t++) {
          await sleep(1000);
          const sts = await Promise.all(
            cluster.nodes
              .filter((n) => n.running)
              .map((n) => n.status(2000).catch(() => undefined)),
          );
          const r = (await fetch(`${sink.origin}/receipts`)
            .then((res) => res.json())
            .catch(() => [])) as unknown[];
          log(
            `    t=${Date.now() - killMs} receipts ${r.length} | ` +
              sts
                .map((st) => {
                  const g = st?.groups.find((x) => x.groupId === groupId);
                  return `${st?.nodeId} ${g?.role} t${g?.term} c${g?.commit} a${g?.applied} l${g?.lastIndex} q${g?.quiesced} proposed ${st?.schedulerProposed} delivered ${st?.schedulerDelivered} results ${st?.schedulerResults} queued ${st?.deliveryQueued} inflight ${st?.deliveryInflight}`;
                })
                .join(' | '),
          );
        }
      })();
    const windowEndMs = Math.floor((killMs + 6000) / 1000) * 1000;
    const seconds = (windowEndMs - windowStartMs) / 1000 + 1;
    const expectedSlots = ids.length * seconds;
    const fireIds = new Set<string>();
    for (const id of ids)
      for (let s = windowStartMs; s <= windowEndMs; s += 1000) fireIds.add(`busy/${id}:${s}`);
    // Wait for every slot of the window; give up once no receipt of the window arrived for
    // 60 s (or 3 min after its end): what is missing then is lost.
    let receipts: [string, number, number][] = [];
    let got = 0;
    let progressMs = Date.now();
    for (;;) {
      await sleep(1000);
      if (Date.now() < windowEndMs + 1500) continue;
      receipts = (await (await fetch(`${sink.origin}/receipts`)).json()) as typeof receipts;
      const now = new Set(receipts.map((r) => r[0]).filter((id) => fireIds.has(id))).size;
      if (now > got) progressMs = Date.now();
      got = now;
      if (got === fireIds.size) break;
      if (Date.now() - progressMs > 60_000 || Date.now() > windowEndMs + 180_000) break;
    }
    tracing = false;
    const first = new Map<string, { atMs: number; term: number }>();
    let duplicates = 0;
    for (const [fireId, atMs, token] of receipts) {
      if (!fireIds.has(fireId)) continue;
      if (first.has(fireId)) duplicates++;
      else first.set(fireId, { atMs, term: termOfToken(token) });
    }
    let resumeAtMs = Infinity;
    let delayed = 0;
    let delayedBefore = 0;
    const lagsAfter: number[] = [];
    for (const [fireId, r] of first) {
      const slotMs = Number(fireId.slice(fireId.lastIndexOf(':') + 1));
      const lag = r.atMs - slotMs;
      if (slotMs > killMs && r.atMs > killMs) resumeAtMs = Math.min(resumeAtMs, r.atMs);
      if (slotMs >= killMs - 1000) {
        lagsAfter.push(lag);
        if (lag > 1000) delayed++;
      } else if (lag > 1000) delayedBefore++;
    }
    lagsAfter.sort((a, b) => a - b);
    const result: FailoverResult = {
      jobs: opts.jobs,
      groupId,
      killedNode: before.node.id,
      newLeader: after?.node.id ?? '',
      electedMs,
      resumeMs: resumeAtMs - killMs,
      expectedSlots,
      lostSlots: expectedSlots - first.size,
      delayedSlots: delayed,
      delayedBeforeKill: delayedBefore,
      duplicates,
      windowSeconds: seconds,
      lagP99AfterKillMs: lagsAfter[Math.floor(lagsAfter.length * 0.99)] ?? Number.NaN,
      error: undefined,
    };
    log(
      `  ${after?.node.id ?? 'no node'} leads after ${fmt(electedMs)} ms; fires resume ${fmt(result.resumeMs)} ms after the kill; ` +
        `window ${seconds} s × ${fmt(opts.jobs)} jobs = ${fmt(expectedSlots)} slots: lost ${result.lostSlots}, ` +
        `late > 1 s ${delayed} from the kill on (${delayedBefore} before it), duplicates ${duplicates}, lag p99 from the kill on ${fmt(result.lagP99AfterKillMs)} ms; ` +
        `the sink received ${fmt(receipts.length)} requests in all`,
    );
    return result;
  } finally {
    for (const c of clients) c.close();
    cluster.cleanup();
    sink.child.kill();
  }
}

function void0(jobs: number, groupId: number, error: string): FailoverResult {
  return {
    jobs,
    groupId,
    killedNode: '',
    newLeader: '',
    electedMs: Number.NaN,
    resumeMs: Number.NaN,
    expectedSlots: 0,
    lostSlots: 0,
    delayedSlots: 0,
    delayedBeforeKill: 0,
    duplicates: 0,
    windowSeconds: 0,
    lagP99AfterKillMs: Number.NaN,
    error,
  };
}
