/**
 * What the API layer needs from a running node, as an interface: the composition root
 * (src/server/node.ts) satisfies it, and the API never reaches into the node's wiring. Keeping
 * it narrow is what lets src/api sit below the server in the layering.
 */
import type { MultiRaftHost } from '../multiraft/host.js';
import type { FireIntent } from '../scheduler/commands.js';
import type { MetaStateMachine } from '../placement/meta-state.js';
import type { NodeId } from '../raft/messages.js';
import type { SchedulerStateMachine } from '../scheduler/state-machine.js';

export interface ApiNode {
  readonly id: NodeId;
  readonly meta: MetaStateMachine;
  readonly config: { readonly groups: number };
  readonly host: Pick<
    MultiRaftHost,
    'groups' | 'propose' | 'proposeBatch' | 'read' | 'report' | 'proposeConfChange'
  >;
  readonly data: ReadonlyMap<number, { readonly scheduler: SchedulerStateMachine }>;
  /** Graceful hand-over of a data group (drains in-flight deliveries first). */
  readonly scheduler: {
    handOver(groupId: number, to: NodeId): void;
    /** On the group's leader: the intent recording the job's overdue slots, if any. */
    overdueIntent(groupId: number, jobId: string, nowMs: number): FireIntent | undefined;
  };
}
