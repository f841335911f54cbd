/**
 * What the API layer needs from a running node, as an interface: the composition root
 * (src/server/node.ts) satisfies it, and the API never reaches into the node's wiring. Keeping
 * it narrow is what lets src/api sit below the server in the layering.
 */
import type { ChannelCredentials } from '@grpc/grpc-js';
import type { TargetPolicy } from '../delivery/target-policy.js';
import type { RunOutputStore } from '../delivery/run-output-store.js';
import type { WorkerHub } from '../delivery/worker-hub.js';
import type { MultiRaftHost } from '../multiraft/host.js';
import type { CompleteRunCommand, FireIntent } from '../scheduler/commands.js';
import type { RunCompletion } from '../scheduler/dispatcher.js';
import type { UpstreamAnswer } from '../scheduler/upstream.js';

/** What upstream job `jobKey`'s run for downstream slot `slotMs` came to, read where it lives. */
export type UpstreamReader = (jobKey: string, slotMs: number) => Promise<UpstreamAnswer>;
import type { MetaStateMachine } from '../placement/meta-state.js';
import type { NodeId } from '../raft/messages.js';
import type { SchedulerStateMachine } from '../scheduler/state-machine.js';

/** What the API asks of tracing: a span per call, ended with the call's gRPC status name. */
export interface CallTracing {
  readonly enabled: boolean;
  apiCall(method: string): (status: string) => void;
}

/** A data group's state as the API reads it. */
export interface DataGroupView {
  readonly scheduler: SchedulerStateMachine;
  /** False once a split moved the key's shard hash out of this group's range. */
  owns(key: string): boolean;
  /** The groups split off this one (their split entries applied here). */
  readonly childIds: readonly number[];
}

export interface ApiNode {
  readonly id: NodeId;
  /** Spans of API calls (the node's src/observe/tracing.ts; off: `enabled` false). */
  readonly tracing: CallTracing;
  /** Pull-based workers' streams on this node (WorkerService). */
  readonly workers: WorkerHub;
  /** Runs' outputs this node received, kept beside the log (RunService.GetRunOutput). */
  readonly runOutputs: RunOutputStore;
  readonly meta: MetaStateMachine;
  readonly config: {
    readonly groups: number;
    /** A group holding more jobs than this is split in two; 0 = never automatically. */
    readonly splitJobs: number;
    /** A group firing more than this per second (last minute) is split; 0 = never. */
    readonly splitFireRate: number;
    readonly delivery: {
      /** Which webhook targets a job may name (`--allow-target` widens the default). */
      readonly targetPolicy: TargetPolicy;
    };
  };
  readonly host: Pick<
    MultiRaftHost,
    'groups' | 'propose' | 'proposeBatch' | 'read' | 'report' | 'proposeConfChange'
  >;
  readonly data: ReadonlyMap<number, DataGroupView>;
  /** Graceful hand-over of a data group (drains in-flight deliveries first). */
  readonly scheduler: {
    handOver(groupId: number, to: NodeId): void;
    /** On the group's leader: the intent recording the job's overdue slots, if any. */
    overdueIntent(groupId: number, jobId: string, nowMs: number): FireIntent | undefined;
    /**
     * On the group's leader: stops new intents and deliveries and resolves once the in-flight
     * ones have finished and their results committed (or after `maxMs`); endDrain resumes.
     */
    drain(groupId: number, maxMs: number): Promise<void>;
    endDrain(groupId: number): void;
    /** On the group's leader: first attempts handed out per second (last minute); else 0. */
    fireRatePerSec(groupId: number): number;
    /** Whether this node's leader of the group has an attempt of the run in flight. */
    isInFlight(groupId: number, fireId: string): boolean;
    /** The attempt of the run this node's leader of the group is making now, if any. */
    sendingAttempt(groupId: number, fireId: string): number | undefined;
    /** How the node's leaders read a waiting run's upstreams (the API routes to their groups). */
    setUpstreamReader(reader: UpstreamReader): void;
    /**
     * Calls `listener` with each run of job `jobKey` in the group whose state, or flight on
     * this node's leader, changed; returns the function that stops it.
     */
    watchRuns(groupId: number, jobKey: string, listener: (fireId: string) => void): () => void;
    /** On the group's leader: the complete-run entry of a receiver's completion. */
    completionCommand(
      groupId: number,
      completion: RunCompletion,
      nowMs: number,
    ): CompleteRunCommand | undefined;
  };
  /**
   * How this node dials other nodes' client APIs (forwarding): TLS credentials when the client
   * API serves TLS (`--tls-cert`), undefined for plaintext.
   */
  readonly apiDialCredentials: ChannelCredentials | undefined;
  /**
   * The tenant's deliveries on this node: queued and in flight now; handed out in the last
   * complete second, and how many of those waited for its fire rate.
   */
  tenantDeliveries(tenant: string): {
    readonly queued: number;
    readonly inflight: number;
    readonly fired: number;
    readonly throttled: number;
  };
  /**
   * Before a node is added (AddNode): with peer mutual TLS, checks that the node answers on
   * `peerAddress` with a certificate signed by the cluster's peer CA (rejects with
   * PEER_TLS_UNVERIFIED otherwise); without peer TLS, resolves at once.
   */
  verifyJoiningPeer(peerAddress: string): Promise<void>;
}
