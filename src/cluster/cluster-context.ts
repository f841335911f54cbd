/**
 * What the cluster operations work with, as interfaces: the node they run on (ClusterNode) and a
 * way to reach other nodes (ClusterContext: run a call on a group's leader, or ask one member).
 * The API provides both and hands them in (src/api/api-context.ts; its router does the
 * forwarding): src/cluster sits below src/api in the layering and never imports it.
 */
import type { MultiRaftHost } from '../multiraft/host.js';
import type { MetaStateMachine } from '../placement/meta-state.js';
import type { NodeId } from '../raft/messages.js';
import type { SchedulerStateMachine } from '../scheduler/state-machine.js';

/** What the cluster operations need from a running node (the API's ApiNode is one). */
export interface ClusterNode {
  readonly id: NodeId;
  readonly meta: MetaStateMachine;
  readonly config: {
    /** A group holding more jobs than this is split in two; 0 = never automatically. */
    readonly splitJobs: number;
    /** A group firing more than this per second (last minute) is split; 0 = never. */
    readonly splitFireRate: number;
  };
  readonly host: Pick<MultiRaftHost, 'groups' | 'propose' | 'report' | 'proposeConfChange'>;
  readonly data: ReadonlyMap<number, { readonly scheduler: SchedulerStateMachine }>;
  readonly scheduler: {
    /** Graceful hand-over of a data group (drains in-flight deliveries first). */
    handOver(groupId: number, to: NodeId): void;
    /**
     * On the group's leader: stops new intents and deliveries and resolves once the in-flight
     * ones have finished and their results committed (or after `maxMs`); endDrain resumes.
     */
    drain(groupId: number, maxMs: number): Promise<void>;
    endDrain(groupId: number): void;
    /** On the group's leader: first attempts handed out per second (last minute); else 0. */
    fireRatePerSec(groupId: number): number;
  };
  /**
   * Before a node is added (AddNode): with peer mutual TLS, checks that the node answers on
   * `peerAddress` with a certificate signed by the cluster's peer CA (rejects with
   * PEER_TLS_UNVERIFIED otherwise); without peer TLS, resolves at once.
   */
  verifyJoiningPeer(peerAddress: string): Promise<void>;
}

/**
 * The call an operation runs in: a client's (the API's CallContext, src/api/router.ts, is one,
 * and is passed on as it came) or one of the operation's own (not forwarded, no route).
 */
export interface OpContext {
  /** Absolute deadline (ms since epoch); Infinity when the caller set none. */
  readonly deadlineMs: number;
  /** The call came from another node's router. */
  readonly forwarded: boolean;
  /** The `group:epoch` the forwarding node routed by, if any. */
  readonly route: string | undefined;
}

/** The services whose methods the operations call on other nodes. */
export type ClusterService = 'AdminService' | 'NodeService';

export interface ClusterContext {
  readonly node: ClusterNode;
  /** Runs `local` on the leader of `groupId`, forwarding `service.name(req)` there if need be. */
  onGroup<T>(
    ctx: OpContext,
    groupId: number,
    service: ClusterService,
    name: string,
    req: unknown,
    local: () => Promise<T>,
  ): Promise<T>;
  /** Calls NodeService.`name` on the member whose API listens at `address`, within ctx's deadline. */
  callMember<T>(address: string, name: string, request: unknown, ctx: OpContext): Promise<T>;
}

export interface ClusterLogger {
  warn(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
}

/** The pause between two looks at a group (a change applying, a new leader taking over). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
