/**
 * `npm run bench:replication`: committed entries per second and commit latency through a real
 * 3-process cluster (16 groups, LevelDB with fsync, gRPC between nodes), next to the ceiling of
 * the same disk measured in the same run: raw LevelDB chained batches of the same entries with
 * `sync: true`, in a single process. Figures are printed, never asserted.
 *
 * Load: for each group, clients send PutBatch calls of ~100-byte values straight to the group's
 * leader, `--inflight` calls in flight per group, for `--seconds`.
 */
import { ClassicLevel } from 'classic-level';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { planBootstrap } from '../src/placement/bootstrap-plan.js';
import { hashShardKey } from '../src/placement/hash.js';
import { lookupRange, splitRing } from '../src/placement/ring.js';
import { ProcCluster, type ProcNode } from '../test/helpers/cluster.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    groups: { type: 'string', default: '16' },
    batch: { type: 'string', default: '100' },
    inflight: { type: 'string', default: '4' },
  },
});
const SECONDS = Number(values.seconds);
const GROUPS = Number(values.groups);
const BATCH = Number(values.batch);
const INFLIGHT = Number(values.inflight);
const VALUE = 'x'.repeat(80);

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Keys that land in each group, so a batch goes to exactly one leader. */
function keysByGroup(): Map<number, string[]> {
  const ranges = splitRing(GROUPS, 1);
  const out = new Map<number, string[]>();
  for (let i = 0; out.size < GROUPS || [...out.values()].some((k) => k.length < BATCH); i++) {
    const key = `key-${i}`;
    const g = lookupRange(ranges, hashShardKey(key)).groupId;
    const list = out.get(g) ?? [];
    if (list.length < BATCH) list.push(key);
    out.set(g, list);
  }
  return out;
}

async function ceiling(entries: number): Promise<{ perSec: number; p50: number; p99: number }> {
  const dir = mkdtempSync(join(os.tmpdir(), 'tickraft-ceiling-'));
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, {
    keyEncoding: 'view',
    valueEncoding: 'view',
  });
  await db.open();
  const value = new Uint8Array(100).fill(7);
  const latencies: number[] = [];
  let index = 0;
  const started = performance.now();
  while (index < entries) {
    const b = db.batch();
    for (let i = 0; i < BATCH * 4; i++) {
      const key = new Uint8Array(13);
      const view = new DataView(key.buffer);
      view.setUint8(0, 0x4c);
      view.setUint32(1, index % GROUPS);
      view.setUint32(9, index++);
      b.put(key, value);
    }
    const t0 = performance.now();
    await b.write({ sync: true });
    latencies.push(performance.now() - t0);
  }
  const secs = (performance.now() - started) / 1000;
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  latencies.sort((a, b) => a - b);
  return { perSec: entries / secs, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

type PutBatch = (
  req: { puts: { key: string; value: string }[] },
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: { committed: number }) => void,
) => void;

async function run(): Promise<void> {
  const cluster = await ProcCluster.create({
    groups: GROUPS,
    extraArgs: ['--snapshot-entries', '50000'],
  });
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    // Right after start, each node hands the groups it leads to their preferred node (the first
    // replica of the plan). The load goes to the leaders seen here, so wait (bounded) for those
    // transfers: one landing mid-run would fail that group's calls for the rest of the run.
    const plan = planBootstrap(
      cluster.nodes.map((n) => n.id),
      GROUPS,
    );
    let leaders = await cluster.leaders();
    for (let waited = 0; waited < 10_000; waited += 100) {
      if (plan.groups.every((g) => leaders.get(g.groupId) === g.replicas[0])) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
      leaders = await cluster.leaders();
    }
    const keys = keysByGroup();
    const latencies: number[] = [];
    let committed = 0;
    let errors = 0;
    const deadline = performance.now() + SECONDS * 1000;
    const started = performance.now();
    const loops: Promise<void>[] = [];
    for (const [groupId, groupKeys] of keys) {
      const node: ProcNode = cluster.node(leaders.get(groupId)!);
      const client = node.client as unknown as grpc.Client & { putBatch: PutBatch };
      const puts = groupKeys.map((key) => ({ key, value: VALUE }));
      for (let w = 0; w < INFLIGHT; w++) {
        loops.push(
          (async () => {
            while (performance.now() < deadline) {
              const t0 = performance.now();
              await new Promise<void>((resolve) => {
                client.putBatch.call(
                  client,
                  { puts },
                  new grpc.Metadata(),
                  { deadline: Date.now() + 10_000 },
                  (err, res) => {
                    if (err) errors++;
                    else {
                      committed += res.committed;
                      latencies.push(performance.now() - t0);
                    }
                    resolve();
                  },
                );
              });
            }
          })(),
        );
      }
    }
    await Promise.all(loops);
    const secs = (performance.now() - started) / 1000;
    const loopStats = await Promise.all(cluster.nodes.map((n) => n.status()));
    latencies.sort((a, b) => a - b);
    const ceil = await ceiling(Math.max(200_000, committed));
    const perSec = committed / secs;
    console.log(
      `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}`,
    );
    console.log(
      `cluster: 3 processes on loopback, ${GROUPS} groups, ${BATCH} puts of ~100 B per call, ${INFLIGHT} calls in flight per group, ${SECONDS} s`,
    );
    console.log(
      `committed entries/s (cluster-wide):   ${perSec.toFixed(0)}   (${committed} entries, ${errors} failed calls)`,
    );
    console.log(
      `commit latency per call of ${BATCH}:     p50 ${percentile(latencies, 50).toFixed(1)} ms   p99 ${percentile(latencies, 99).toFixed(1)} ms`,
    );
    console.log(
      `ceiling, raw LevelDB sync batches of ${BATCH * 4} × 100 B, one process: ${ceil.perSec.toFixed(0)} entries/s (p50 ${ceil.p50.toFixed(2)} ms, p99 ${ceil.p99.toFixed(2)} ms per write)`,
    );
    console.log(`ratio to ceiling: ${((perSec / ceil.perSec) * 100).toFixed(1)} %`);
    for (const st of loopStats) {
      console.log(
        `  ${st.nodeId}: ${st.loopTurns} loop turns, ${st.loopCommits} commits ` +
          `(${(st.entriesPersisted / Math.max(1, st.loopCommits)).toFixed(1)} entries each, ` +
          `${(st.fsyncMsTotal / Math.max(1, st.loopCommits)).toFixed(2)} ms each), ${st.messagesSent} messages sent`,
      );
    }
  } finally {
    // A graceful stop lets `NODE_OPTIONS=--cpu-prof` write the nodes' profiles.
    await Promise.all(cluster.nodes.map((n) => n.term()));
    cluster.cleanup();
  }
}

await run();
