/**
 * In-memory shapes of Raft entries and messages. The wire mapping (proto) lives in the transport
 * layer; the core only ever sees these plain objects. One flat Message type with a `type`
 * discriminator (as etcd does) keeps stepping, tracing and simulating uniform.
 */

/** Node ids are short stable strings ("n1"). The empty string means "no node". */
export type NodeId = string;
export const NO_NODE: NodeId = '';

export type EntryType = 'normal' | 'conf-change';

export interface Entry {
  readonly term: number;
  readonly index: number;
  readonly type: EntryType;
  /** Opaque application bytes; an empty normal entry is the leader's no-op. */
  readonly data: Uint8Array;
}

/** Durable per-replica state that must be synced before dependent messages leave. */
export interface HardState {
  readonly term: number;
  readonly vote: NodeId;
  readonly commit: number;
}

export const EMPTY_HARD_STATE: HardState = { term: 0, vote: NO_NODE, commit: 0 };

/**
 * A voter/learner configuration. With `votersOutgoing` non-empty the group is in a joint
 * configuration: decisions need a majority of `voters` and of `votersOutgoing`.
 * `learnersNext` holds voters being demoted to learners; they become learners on leaving joint.
 */
export interface ConfState {
  readonly voters: readonly NodeId[];
  readonly votersOutgoing: readonly NodeId[];
  readonly learners: readonly NodeId[];
  readonly learnersNext: readonly NodeId[];
  /** Leave the joint configuration automatically once it is applied. */
  readonly autoLeave: boolean;
}

export const EMPTY_CONF_STATE: ConfState = {
  voters: [],
  votersOutgoing: [],
  learners: [],
  learnersNext: [],
  autoLeave: false,
};

export interface SnapshotMeta {
  readonly index: number;
  readonly term: number;
  readonly confState: ConfState;
}

export interface Snapshot {
  readonly meta: SnapshotMeta;
  /** The state machine at `meta.index`, opaque to the core. */
  readonly data: Uint8Array;
}

export type ConfChangeType = 'add-voter' | 'add-learner' | 'remove-node';

export interface ConfChangeSingle {
  readonly type: ConfChangeType;
  readonly nodeId: NodeId;
}

/**
 * A membership change. One change with `transition: 'simple'` is applied directly (it can only
 * move one voter); anything else enters a joint configuration. An empty `changes` list leaves
 * the joint configuration.
 */
export interface ConfChange {
  readonly transition: 'auto' | 'explicit' | 'simple';
  readonly changes: readonly ConfChangeSingle[];
}

export type MessageType =
  | 'app'
  | 'app-resp'
  | 'heartbeat'
  | 'heartbeat-resp'
  | 'vote'
  | 'vote-resp'
  | 'pre-vote'
  | 'pre-vote-resp'
  | 'snap'
  | 'timeout-now'
  | 'read-index'
  | 'read-index-resp'
  /** Leader → follower: the group is idle and caught up at (index, logTerm); stop timing out. */
  | 'quiesce';

export interface Message {
  readonly type: MessageType;
  readonly from: NodeId;
  readonly to: NodeId;
  readonly term: number;
  /** app: term of the entry at `index`; vote: candidate's last log term; reject hint term. */
  readonly logTerm: number;
  /** app: index preceding `entries`; app-resp: last matching index; vote: last log index. */
  readonly index: number;
  readonly entries: readonly Entry[];
  readonly commit: number;
  readonly reject: boolean;
  /** app-resp reject: the follower's guess of the last index that may match. */
  readonly rejectHint: number;
  readonly snapshot: Snapshot | undefined;
  /**
   * heartbeat/heartbeat-resp: the leader's heartbeat round; read-index(-resp): the request id;
   * vote/pre-vote: 1 for a campaign started by leadership transfer (ignores leases).
   */
  readonly context: number;
}

/** Builds a message with every optional field defaulted, so call sites name only what matters. */
export function message(
  fields: Pick<Message, 'type' | 'from' | 'to' | 'term'> & Partial<Message>,
): Message {
  return {
    logTerm: 0,
    index: 0,
    entries: [],
    commit: 0,
    reject: false,
    rejectHint: 0,
    snapshot: undefined,
    context: 0,
    ...fields,
  };
}

/**
 * Size of an entry for flow control and proposal limits: payload bytes plus a fixed header.
 * (`length`, which equals byteLength for a Uint8Array, is the one V8 inlines; this is hot.)
 */
export function entryBytes(e: Entry): number {
  return e.data.length + 16;
}

export function isResponse(type: MessageType): boolean {
  return (
    type === 'app-resp' ||
    type === 'heartbeat-resp' ||
    type === 'vote-resp' ||
    type === 'pre-vote-resp' ||
    type === 'read-index-resp'
  );
}
