// How CreateJobs parts travel between nodes, with real processes: NodeService.NodeCreateJobs
// (several groups' packed parts for one leader in one call) runs each part on its own: a part
// for a group the node leads is created; one for a group it does not lead fails
// RAFT_NOT_LEADER, one routed by another epoch ROUTE_STALE, a forged one REQUEST_INVALID, and
// none of those creates anything. Then a public CreateJobs that spans every group, sent to each
// node in turn, creates every job exactly once whichever way its parts went.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { ApiCallError, bearerMetadata } from '../../src/api/client.js';
import { JobSpecCompiler, requireFirstSlot } from '../../src/api/job-spec.js';
import { loadApiServices } from '../../src/api/proto.js';
import { decode, encode } from '../../src/base/codec.js';
import { hashShardKey } from '../../src/placement/hash.js';
import { jobIdOfKey, jobKeyOf } from '../../src/scheduler/job-key.js';
import { lookupRange, type RingRange } from '../../src/placement/ring.js';
import {
  encodeSchedulerCommand,
  packCreates,
  type CreateJobCommand,
} from '../../src/scheduler/commands.js';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';
import { eventually, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';

type Obj = Record<string, unknown>;

interface GroupInfo {
  readonly groupId: number;
  readonly leader: string;
  readonly epoch: number;
  readonly range: RingRange;
}

async function groupsOf(ac: ApiCluster): Promise<GroupInfo[]> {
  const st = await ac.client('n1').call<Obj>('AdminService', 'ClusterStatus', {});
  return (st['groups'] as Obj[])
    .filter((g) => (g['rangeEnd'] as number) > (g['rangeStart'] as number))
    .map((g) => ({
      groupId: g['groupId'] as number,
      leader: g['leader'] as string,
      epoch: g['epoch'] as number,
      range: {
        groupId: g['groupId'] as number,
        start: g['rangeStart'] as number,
        end: g['rangeEnd'] as number,
      },
    }));
}

/** `n` checked creates whose ids fall in `groupId`, named `prefix-…`. */
function createsIn(
  ranges: readonly RingRange[],
  groupId: number,
  prefix: string,
  n: number,
  url: string,
): CreateJobCommand[] {
  const nowMs = Date.now();
  const compiler = new JobSpecCompiler(nowMs);
  const out: CreateJobCommand[] = [];
  for (let i = 0; out.length < n; i++) {
    // Parts name jobs by their keys, as createCommand makes them.
    const jobId = jobKeyOf(TENANT, `${i}-${prefix}`);
    if (lookupRange(ranges, hashShardKey(jobId)).groupId !== groupId) continue;
    const compiled = compiler.compile({
      tenant: TENANT,
      schedule: `${i % 60} 4 1 1 *`,
      target: { url },
    });
    out.push({
      op: 'create-job',
      atMs: nowMs,
      jobId,
      spec: compiled.spec,
      nextFireAtMs: requireFirstSlot(compiled, nowMs),
      requestId: undefined,
    });
  }
  return out;
}

function nodeCreateJobs(endpoint: string, parts: Obj[]): Promise<Obj[]> {
  const ctor = loadApiServices().NodeService;
  const client = new ctor(endpoint, grpc.credentials.createInsecure());
  const def = ctor.service['NodeCreateJobs']!;
  return new Promise<Obj[]>((resolve, reject) => {
    client.makeUnaryRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      { parts },
      bearerMetadata(TEST_ADMIN_TOKEN),
      { deadline: Date.now() + 10_000 },
      (err, res) => {
        client.close();
        if (err) reject(err);
        else resolve((res as Obj)['parts'] as Obj[]);
      },
    );
  });
}

async function exists(ac: ApiCluster, jobId: string): Promise<boolean> {
  try {
    await ac.client('n2').call('JobService', 'GetJob', { tenant: TENANT, jobId });
    return true;
  } catch (err) {
    if (err instanceof ApiCallError && err.status === grpc.status.NOT_FOUND) return false;
    throw err;
  }
}

t.test(
  'NodeCreateJobs runs each part on its own, and CreateJobs creates each job once',
  async (t) => {
    const ac = await ApiCluster.start(t, { groups: 4 });
    const url = `${ac.sink.url}/hook`;
    let attempt = 0;
    // Leaders may still move right after start-up: a try whose led part was refused as
    // RAFT_NOT_LEADER starts again with fresh ids.
    const { outcomes, parts } = await eventually(async () => {
      attempt++;
      const groups = await groupsOf(ac);
      const ranges = groups.map((g) => g.range);
      const node = groups.find((g) => g.leader !== '')!.leader;
      const led = groups.find((g) => g.leader === node)!;
      const other = groups.find((g) => g.leader !== node)!;
      const part = (g: GroupInfo, name: string, epoch = g.epoch): Obj & { ids: string[] } => {
        const creates = createsIn(ranges, g.groupId, `${name}-${attempt}`, 5, url);
        return {
          groupId: g.groupId,
          epoch,
          entries: packCreates(creates).map(encodeSchedulerCommand),
          ids: creates.map((c) => jobIdOfKey(c.jobId)),
        };
      };
      const forged = part(led, 'forged');
      const m = decode((forged['entries'] as Uint8Array[])[0]!) as { nextFireAtMs: number[] };
      m.nextFireAtMs[0]! += 1000;
      forged['entries'] = [encode(m)];
      const parts = [
        part(led, 'led'),
        part(other, 'other'),
        part(led, 'stale', led.epoch + 1),
        forged,
      ];
      const outcomes = await nodeCreateJobs(endpointOf(ac.cluster.node(node)), parts);
      if (outcomes[0]!['errorCode'] === 'RAFT_NOT_LEADER') throw new Error('leader moved');
      return { outcomes, parts };
    }, 30_000);
    t.same(
      outcomes.map((o) => [o['created'], o['errorCode']]),
      [
        [5, ''],
        [0, 'RAFT_NOT_LEADER'],
        [0, 'ROUTE_STALE'],
        [0, 'REQUEST_INVALID'],
      ],
    );
    t.match(outcomes[3]!['errorMessage'], /nextFireAtMs/);
    const [led, ...refused] = parts;
    for (const id of led!.ids) t.ok(await exists(ac, id), `${id} was created`);
    for (const p of refused)
      for (const id of p.ids) t.notOk(await exists(ac, id), `${id} was not created`);

    // Through the public API: 60 jobs over every group, sent to each node in turn. Groups
    // commit on their own, so a try that failed part-way (a leader moving under a loaded
    // machine) may have written some groups' jobs: the retry carries the same request ids, and
    // those count as duplicates.
    for (const entry of ['n1', 'n2', 'n3']) {
      const jobs = Array.from({ length: 60 }, (_, i) => ({
        jobId: `${i}-bulk-${entry}`,
        requestId: `bulk-${entry}-${i}`,
        spec: ac.spec({ schedule: `${i % 60} 5 1 1 *` }),
      }));
      let tries = 0;
      const res = await eventually(() => {
        tries++;
        return ac.client(entry).call<Obj>('JobService', 'CreateJobs', { jobs });
      }, 30_000);
      if (tries === 1) t.same(res, { created: 60, duplicates: 0 }, `CreateJobs through ${entry}`);
      else
        t.equal(
          Number(res['created']) + Number(res['duplicates']),
          60,
          `CreateJobs through ${entry}, ${tries} tries: ${JSON.stringify(res)}`,
        );
      const again = await ac.client(entry).call<Obj>('JobService', 'CreateJobs', { jobs });
      t.same(again, { created: 0, duplicates: 60 }, 'sent again, same request ids: duplicates');
      const withoutIds = await ac
        .client(entry)
        .call<Obj>('JobService', 'CreateJobs', { jobs: jobs.map(({ requestId: _, ...j }) => j) })
        .catch((err: unknown) => err);
      t.equal(
        withoutIds instanceof ApiCallError ? withoutIds.status : withoutIds,
        grpc.status.ALREADY_EXISTS,
        'sent again without request ids: the jobs exist',
      );
    }
    const listed = await ac
      .client('n3')
      .call<Obj>('JobService', 'ListJobs', { tenant: TENANT, pageSize: 1000 });
    const bulk = (listed['jobs'] as Obj[]).filter((j) => String(j['id']).includes('-bulk-'));
    t.equal(bulk.length, 180, 'each job once');
  },
);
