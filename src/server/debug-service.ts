/**
 * The test-only DebugService (proto/debug.proto): puts and reads over the data groups' key-value
 * state machines, scheduler administration as JSON, and a status dump. It is unauthenticated and
 * reaches into the node's internals, so it is served only on its own address, and only when
 * `tickraft serve --debug-listen host:port` asks for it (the real-process tests, the chaos suite
 * and the benchmarks do); the client API port (`--listen`) never serves it. Keys are placed with
 * the same ring as jobs. A call for a group this node does not lead fails with UNAVAILABLE and
 * the leader's id in the `tickraft-leader` metadata, so a client can retry there.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import { hashShardKey } from '../placement/hash.js';
import { jobKeyOf } from '../scheduler/job-key.js';
import { JOB_ID_PATTERN, TENANT_ID_PATTERN } from '../api/job-spec.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { lookupRange, splitRing, type RingRange } from '../placement/ring.js';
import { encodeKvPut } from './kv-state-machine.js';
import {
  parsePutBatchRequest,
  putCommand,
  putCount,
  type PutBatchRequestRanges,
  type PutCommand,
} from './put-batch.js';
import type { TickraftNode } from './node.js';
import type { LeadershipTimeline } from './scheduler-runtime.js';
import { SystemClock } from '../base/clock.js';
import { ValidationError } from '../base/errors.js';
import { SchedulerAdmin } from '../api/scheduler-admin.js';
import { bindGrpcServer, createGrpcServer, shutdownGrpcServer } from '../api/grpc-server.js';

const PROTO_PATH = fileURLToPath(new URL('../../proto/debug.proto', import.meta.url));

export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

interface PutRequest {
  key: string;
  value: string;
}

/** Loads the DebugService definition; shared by the server and test clients. */
export function loadDebugService(): grpc.ServiceClientConstructor {
  const def = protoLoader.loadSync(PROTO_PATH, PROTO_LOADER_OPTIONS);
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    tickraft: { v1: { DebugService: grpc.ServiceClientConstructor } };
  };
  return pkg.tickraft.v1.DebugService;
}

export class DebugServer {
  private server: grpc.Server | undefined;
  private readonly admin: SchedulerAdmin;

  constructor(private readonly node: TickraftNode) {
    this.admin = new SchedulerAdmin(node, SystemClock);
  }

  private async scheduler(json: string): Promise<unknown> {
    let req: Record<string, unknown>;
    try {
      req = JSON.parse(json) as Record<string, unknown>;
    } catch {
      throw new ValidationError('REQUEST_INVALID', [{ field: 'json', reason: 'is not JSON' }]);
    }
    // A job is named by `tenant` and `jobId`, as in the public API; the admin takes its key.
    const named = (): string => {
      const tenant = typeof req['tenant'] === 'string' ? req['tenant'] : '';
      const jobId = typeof req['jobId'] === 'string' ? req['jobId'] : '';
      const violations = [];
      if (!TENANT_ID_PATTERN.test(tenant))
        violations.push({ field: 'tenant', reason: "must be the job's tenant" });
      if (!JOB_ID_PATTERN.test(jobId))
        violations.push({ field: 'jobId', reason: 'must be a job id' });
      if (violations.length > 0) throw new ValidationError('REQUEST_INVALID', violations);
      return jobKeyOf(tenant, jobId);
    };
    switch (req['op']) {
      case 'put-tenant':
        return this.admin.putTenant(req);
      case 'create-job':
        return this.admin.createJob(req);
      case 'create-jobs':
        return this.admin.createJobs(req['jobs']);
      case 'pause-job':
      case 'resume-job':
      case 'delete-job':
      case 'trigger-job':
        return this.admin.jobCommand(req['op'], named());
      case 'update-job':
        return this.admin.updateJob(
          named(),
          req['spec'],
          typeof req['expectedVersion'] === 'number' ? req['expectedVersion'] : undefined,
        );
      case 'get-job':
        return this.admin.getJob(named());
      default:
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'op', reason: `unknown op ${JSON.stringify(req['op'])}` },
        ]);
    }
  }

  /** The ring: from the meta group's map once known, else the flag plan. */
  private ranges(): RingRange[] {
    const groups = [...this.node.meta.groups.values()].sort((a, b) => a.start - b.start);
    if (groups.length > 0)
      return groups.map((g) => ({ groupId: g.id, start: g.start, end: g.end }));
    return splitRing(this.node.config.groups, META_GROUP_ID + 1);
  }

  /** The group that owns `key`. */
  private groupFor(key: string): number {
    return lookupRange(this.ranges(), hashShardKey(key)).groupId;
  }

  private notLeader(groupId: number): grpc.ServiceError {
    const g = this.node.host.groups.get(groupId);
    const md = new grpc.Metadata();
    md.set('tickraft-leader', g?.leaderId ?? '');
    return Object.assign(new Error(`node ${this.node.id} does not lead group ${groupId}`), {
      code: grpc.status.UNAVAILABLE,
      details: `not leader of group ${groupId}`,
      metadata: md,
    });
  }

  private async put(req: PutRequest): Promise<number> {
    const groupId = this.groupFor(req.key);
    const g = this.node.host.groups.get(groupId);
    if (!g || !g.isLeader) throw this.notLeader(groupId);
    await this.node.host.propose(groupId, encodeKvPut({ k: req.key, v: req.value }));
    return groupId;
  }

  /**
   * The puts of a batch, grouped by the group that owns their keys; each group's puts are
   * proposed together (as one proposal they land at consecutive indexes), and the call succeeds
   * once every group applied them.
   */
  private async putBatch(req: PutBatchRequestRanges): Promise<number> {
    const ranges = this.ranges();
    const byGroup = new Map<number, Uint8Array[]>();
    const put: PutCommand = { hash: 0, command: new Uint8Array() };
    const count = putCount(req);
    for (let i = 0; i < count; i++) {
      putCommand(req, i, put);
      const groupId = lookupRange(ranges, put.hash).groupId;
      let datas = byGroup.get(groupId);
      if (datas === undefined) {
        const g = this.node.host.groups.get(groupId);
        if (!g || !g.isLeader) throw this.notLeader(groupId);
        byGroup.set(groupId, (datas = []));
      }
      datas.push(put.command);
    }
    const waits: Promise<unknown[]>[] = [];
    for (const [groupId, datas] of byGroup) waits.push(this.node.host.proposeBatch(groupId, datas));
    await Promise.all(waits);
    return count;
  }

  /**
   * Binds the DebugService's own address (`--debug-listen`; never the client API's); resolves
   * with the port.
   */
  async start(address: string): Promise<number> {
    const service = loadDebugService();
    const server = createGrpcServer();
    // PutBatch requests are parsed by hand (put-batch.ts): the benchmark's hot path.
    const definition: grpc.ServiceDefinition = {
      ...service.service,
      PutBatch: { ...service.service['PutBatch']!, requestDeserialize: parsePutBatchRequest },
    };
    server.addService(definition, {
      put: (call: grpc.ServerUnaryCall<PutRequest, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        this.put(call.request).then(
          (groupId) => cb(null, { groupId }),
          (err: unknown) => cb(toServiceError(err)),
        );
      },
      putBatch: (
        call: grpc.ServerUnaryCall<PutBatchRequestRanges, unknown>,
        cb: grpc.sendUnaryData<unknown>,
      ) => {
        this.putBatch(call.request).then(
          (committed) => cb(null, { committed }),
          (err: unknown) => cb(toServiceError(err)),
        );
      },
      get: (
        call: grpc.ServerUnaryCall<{ key: string }, unknown>,
        cb: grpc.sendUnaryData<unknown>,
      ) => {
        const groupId = this.groupFor(call.request.key);
        const sm = this.node.kvOf(groupId);
        if (!sm) {
          cb(this.notLeader(groupId));
          return;
        }
        this.node.host.read(groupId).then(
          () => {
            const value = sm.get(call.request.key);
            cb(null, { found: value !== undefined, value: value ?? '', groupId });
          },
          (err: unknown) => cb(toServiceError(err)),
        );
      },
      scheduler: (
        call: grpc.ServerUnaryCall<{ json: string }, unknown>,
        cb: grpc.sendUnaryData<unknown>,
      ) => {
        this.scheduler(call.request.json).then(
          (result) => cb(null, { json: JSON.stringify(result) }),
          (err: unknown) => cb(toServiceError(err)),
        );
      },
      status: (
        call: grpc.ServerUnaryCall<{ collectGarbage?: boolean; gcSinceMs?: number }, unknown>,
        cb: grpc.sendUnaryData<unknown>,
      ) => {
        // Summarized before a forced collection, whose own pauses are the bench's, not the node's.
        const gc = this.node.gcPauses.summary(call.request.gcSinceMs ?? 0);
        const gcForced = call.request.collectGarbage === true && collectGarbage();
        cb(null, {
          ...this.status(),
          ...memory(),
          gcForced,
          gcPauses: gc.count,
          gcPauseP50Ms: gc.p50Ms,
          gcPauseP99Ms: gc.p99Ms,
          gcPauseMaxMs: gc.maxMs,
          gcPauseTotalMs: gc.totalMs,
        });
      },
      takeSnapshots: (
        _call: grpc.ServerUnaryCall<unknown, unknown>,
        cb: grpc.sendUnaryData<unknown>,
      ) => {
        this.node.host.snapshotNow().then(
          (snapshots) => cb(null, { snapshots }),
          (err: unknown) => cb(toServiceError(err)),
        );
      },
    });
    this.server = server;
    return bindGrpcServer(server, address);
  }

  status(): Record<string, unknown> {
    const groups = [...this.node.host.groups.values()].map((g) => {
      const st = g.node.status();
      return {
        groupId: g.groupId,
        role: st.role,
        term: st.term,
        leader: st.lead,
        commit: st.commit,
        applied: st.applied,
        lastIndex: st.lastIndex,
        voters: [...st.confState.voters],
        votersOutgoing: [...st.confState.votersOutgoing],
        learners: [...st.confState.learners],
        keys: this.node.kvOf(g.groupId)?.data.size ?? 0,
        quiesced: g.node.isQuiesced(),
        ...timelineFields(this.node.scheduler.leadershipTimeline(g.groupId)),
      };
    });
    return {
      nodeId: this.node.id,
      metaInitialized: this.node.meta.initialized,
      groups,
      metaMembers: this.node.meta.members.size,
      metaGroups: this.node.meta.groups.size,
      snapshotsInstalled: [...this.node.host.groups.values()].reduce(
        (n, g) => n + g.snapshotsInstalled,
        0,
      ),
      snapshotsTaken: this.node.host.stats.snapshotsTaken,
      snapshotBytesTotal: this.node.host.stats.snapshotBytesTotal,
      snapshotEncodeMsTotal: this.node.host.stats.snapshotEncodeMsTotal,
      snapshotEncodeMsMax: this.node.host.stats.snapshotEncodeMsMax,
      snapshotWriteMsTotal: this.node.host.stats.snapshotWriteMsTotal,
      snapshotsRestored: this.node.host.stats.snapshotsRestored,
      snapshotRestoreBytes: this.node.host.stats.snapshotRestoreBytes,
      snapshotRestoreMs: this.node.host.stats.snapshotRestoreMs,
      startupStoreOpenMs: this.node.startup.storeOpenMs,
      startupGroupsOpenMs: this.node.startup.groupsOpenMs,
      startupStartedMs: this.node.startup.startedMs,
      uptimeMs: performance.now(),
      loopTurns: this.node.host.stats.turns,
      loopCommits: this.node.host.stats.commits,
      entriesPersisted: this.node.host.stats.entriesPersisted,
      fsyncMsTotal: this.node.host.stats.fsyncMsTotal,
      messagesSent: this.node.host.stats.messagesSent,
      schedulerProposed: this.node.scheduler.stats.proposed,
      schedulerDelivered: this.node.scheduler.stats.delivered,
      schedulerResults: this.node.scheduler.stats.results,
      deliveryQueued: this.node.deliveryQueued,
      deliveryInflight: this.node.deliveryInflight,
      deliveryPrerendered: this.node.deliveryStats.prerendered,
      deliverySentPrerendered: this.node.deliveryStats.sentPrerendered,
      deliveryLeaseWaits: this.node.deliveryStats.waited,
      cpuMs: cpuMs(),
    };
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    await shutdownGrpcServer(server);
  }
}

function toServiceError(err: unknown): grpc.ServiceError {
  if (isServiceError(err)) return err;
  const code = (err as { code?: unknown }).code;
  const status =
    typeof code === 'string'
      ? (STATUS_OF_CODE[code] ?? grpc.status.INTERNAL)
      : grpc.status.INTERNAL;
  const message = err instanceof Error ? err.message : String(err);
  const md = new grpc.Metadata();
  if (typeof code === 'string') md.set('tickraft-error-code', code);
  const leader = (err as { leaderHint?: unknown }).leaderHint;
  if (typeof leader === 'string' && leader !== '') md.set('tickraft-leader', leader);
  return Object.assign(new Error(message), { code: status, details: message, metadata: md });
}

/**
 * A full collection (twice: the first may leave finalized objects for the second), when the
 * process runs with `--expose-gc`; says whether it ran. For the benchmarks' memory figures.
 */
function collectGarbage(): boolean {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) return false;
  gc();
  gc();
  return true;
}

function memory(): {
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  arrayBuffersBytes: number;
} {
  const m = process.memoryUsage();
  return {
    rssBytes: m.rss,
    heapUsedBytes: m.heapUsed,
    heapTotalBytes: m.heapTotal,
    arrayBuffersBytes: m.arrayBuffers,
  };
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

const STATUS_OF_CODE: Readonly<Record<string, grpc.status>> = {
  RAFT_NOT_LEADER: grpc.status.UNAVAILABLE,
  RAFT_PROPOSAL_UNKNOWN: grpc.status.UNAVAILABLE,
  RAFT_READ_FAILED: grpc.status.UNAVAILABLE,
  RAFT_PROPOSAL_DROPPED: grpc.status.UNAVAILABLE,
  REQUEST_INVALID: grpc.status.INVALID_ARGUMENT,
  JOB_SPEC_INVALID: grpc.status.INVALID_ARGUMENT,
  TENANT_INVALID: grpc.status.INVALID_ARGUMENT,
  JOB_NOT_FOUND: grpc.status.NOT_FOUND,
  JOB_ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  JOB_VERSION_CONFLICT: grpc.status.ABORTED,
  RUN_NOT_FOUND: grpc.status.NOT_FOUND,
  RUN_WRONG_STATE: grpc.status.FAILED_PRECONDITION,
};

function isServiceError(err: unknown): err is grpc.ServiceError {
  return (
    err instanceof Error &&
    typeof (err as { code?: unknown }).code === 'number' &&
    'metadata' in err
  );
}

function timelineFields(t: LeadershipTimeline | undefined): Record<string, number> {
  if (!t) return {};
  return {
    ledTerm: t.term,
    campaignAtMs: t.campaignAtMs,
    electedAtMs: t.electedAtMs,
    caughtUpAtMs: t.caughtUpAtMs,
    leaseAtMs: t.leaseAtMs,
    firstHandOutAtMs: t.firstHandOutAtMs,
  };
}
