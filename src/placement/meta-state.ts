/**
 * The meta group's (group 0) replicated state machine: cluster members and the group map (ring
 * range, replicas, epoch). Commands are JSON: rare, small, and readable in a log dump. Apply is
 * deterministic and rejects what does not fit the current state with a result, never a throw.
 */
import type { RunRetention } from './run-retention.js';
import type { TenantLimits } from './tenant-limits.js';
import type { Entry, NodeId } from '../raft/messages.js';
import type { GroupStateMachine } from '../multiraft/group-replica.js';
import {
  applyMembershipCommand,
  isMembershipCommand,
  type MembershipCommand,
  type MoveRecord,
} from './membership-state.js';
import {
  applyTokenCommand,
  isTokenCommand,
  restoreTokens,
  type TokenCommand,
  type TokenRecord,
} from '../auth/token-state.js';
import {
  applySplitCommand,
  isSplitCommand,
  type SplitCommand,
  type SplitRecord,
} from './split-state.js';

export type MemberState = 'active' | 'draining' | 'removed';

export interface MemberRecord {
  readonly id: NodeId;
  readonly peerAddress: string;
  /** Where the other nodes forward client API calls to (the node's --listen). */
  readonly apiAddress: string;
  /**
   * Where clients are told to dial the node's client API (--advertise-address); absent or ''
   * means apiAddress. Records written before the field existed read as absent.
   */
  readonly advertisedAddress?: string | undefined;
  readonly state: MemberState;
}

/** The client API address clients are told to dial for a member. */
export function clientAddressOf(m: MemberRecord): string {
  return m.advertisedAddress !== undefined && m.advertisedAddress !== ''
    ? m.advertisedAddress
    : m.apiAddress;
}

export interface GroupRecord {
  readonly id: number;
  readonly start: number;
  readonly end: number;
  readonly replicas: readonly NodeId[];
  /** Bumped on every change of range or replicas; routing caches compare it. */
  readonly epoch: number;
  /** The group this one was split from, if any (its replicas were created by the split). */
  readonly splitFrom?: number | undefined;
  /**
   * Where an operator (`tickctl leader transfer`) or the rebalancer last put the group's
   * leadership. Leader balancing hands the group back there, as it hands a group without one
   * back to its bootstrap plan's first replica. Not part of routing: no epoch change.
   */
  readonly preferredLeader?: NodeId | undefined;
}

/**
 * A tenant: who owns jobs, the secrets their webhooks are signed with (two during a rotation:
 * both sign, as Standard Webhooks allows), and its delivery cap.
 */
export interface TenantRecord {
  readonly id: string;
  /** `whsec_…` secrets, newest first; checked by the proposer (src/delivery/signing.ts). */
  readonly signingSecrets: readonly string[];
  /**
   * Deliveries of this tenant in flight at once across the cluster; each node takes a share by
   * the data groups it leads (src/server/scheduler-runtime.ts).
   */
  readonly inflightMax: number;
  readonly updatedAtMs: number;
  /**
   * During a rotation: when the second (previous) secret stops signing. Absent = both sign
   * until the next change. Compared with the delivering node's clock, never inside apply.
   */
  readonly previousSecretUntilMs?: number | undefined;
  /**
   * Share of delivery start slots against other tenants with work queued on the same node,
   * 1-100. Records written before the field existed (log entries, snapshots) read as
   * DEFAULT_PRIORITY_WEIGHT.
   */
  readonly priorityWeight: number;
  /**
   * How long the tenant's finished runs are kept (history and DLQ, per job); absent (records
   * written before the field existed, or never set): DEFAULT_RUN_RETENTION.
   */
  readonly retention?: RunRetention | undefined;
  /** Quotas and rates; absent (older records, or never set): DEFAULT_TENANT_LIMITS. */
  readonly limits?: TenantLimits | undefined;
}

export const DEFAULT_PRIORITY_WEIGHT = 1;

/** A tenant as the state keeps it: a record from an older log entry or snapshot gets defaults. */
function tenantWithDefaults(t: TenantRecord): TenantRecord {
  return t.priorityWeight === undefined ? { ...t, priorityWeight: DEFAULT_PRIORITY_WEIGHT } : t;
}

export type MetaCommand =
  | {
      readonly op: 'init';
      readonly members: readonly Omit<MemberRecord, 'state'>[];
      readonly groups: readonly Omit<GroupRecord, 'epoch'>[];
    }
  | { readonly op: 'put-tenant'; readonly tenant: TenantRecord }
  /** Fails TENANT_ALREADY_EXISTS when the id is taken: creates are not silent overwrites. */
  | { readonly op: 'create-tenant'; readonly tenant: TenantRecord }
  /**
   * Replaces a tenant computed from the version the proposer read (`expectedUpdatedAtMs`);
   * fails TENANT_CONFLICT when another change committed meanwhile, TENANT_NOT_FOUND when gone.
   */
  | {
      readonly op: 'update-tenant';
      readonly tenant: TenantRecord;
      readonly expectedUpdatedAtMs: number;
    }
  /**
   * A node records its own client API address, so that others can forward calls to it, and the
   * address clients are told to dial ('' or absent: the same).
   */
  | {
      readonly op: 'set-api-address';
      readonly id: NodeId;
      readonly apiAddress: string;
      readonly advertisedAddress?: string;
    }
  /** Records GroupRecord.preferredLeader; refused for an unknown group or a removed member. */
  | { readonly op: 'set-preferred-leader'; readonly groupId: number; readonly node: NodeId }
  /** Joins, drains, removals and replica moves: membership-state.ts. */
  | MembershipCommand
  /** Splits of a group's hash range: split-state.ts. */
  | SplitCommand
  /** API tokens: src/auth/token-state.ts. */
  | TokenCommand;

export type MetaResult =
  { ok: true; split?: SplitRecord } | { ok: false; code: string; reason: string };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeMetaCommand(c: MetaCommand): Uint8Array {
  return encoder.encode(JSON.stringify(c));
}

export class MetaStateMachine implements GroupStateMachine {
  initialized = false;
  readonly members = new Map<NodeId, MemberRecord>();
  readonly groups = new Map<number, GroupRecord>();
  readonly tenants = new Map<string, TenantRecord>();
  /** Replica moves in flight, by group (membership-state.ts). */
  readonly moves = new Map<number, MoveRecord>();
  /** Range splits in flight, by parent group (split-state.ts). */
  readonly splits = new Map<number, SplitRecord>();
  /** API tokens by id (src/auth/token-state.ts), and the same by hash. */
  readonly tokens = new Map<string, TokenRecord>();
  readonly tokensByHash = new Map<string, TokenRecord>();
  /** The highest data group id ever used: a split's child takes the next one. */
  maxGroupId = 0;

  apply(entry: Entry): MetaResult {
    const c = JSON.parse(decoder.decode(entry.data)) as MetaCommand;
    if (isSplitCommand(c)) return applySplitCommand(this, c);
    if (isTokenCommand(c)) return applyTokenCommand(this, c);
    if (c.op === 'begin-move' && this.splits.has(c.groupId))
      return {
        ok: false,
        code: 'META_SPLIT_IN_FLIGHT',
        reason: `group ${c.groupId} is being split; move its replicas once the split is done`,
      };
    if (isMembershipCommand(c)) return applyMembershipCommand(this, c);
    switch (c.op) {
      case 'init':
        // Every initial node may propose the same init; the first committed one wins.
        if (this.initialized)
          return {
            ok: false,
            code: 'META_ALREADY_INITIALIZED',
            reason: 'cluster already initialized',
          };
        for (const m of c.members) this.members.set(m.id, { ...m, state: 'active' });
        for (const g of c.groups) this.groups.set(g.id, { ...g, epoch: 1 });
        this.maxGroupId = Math.max(0, ...c.groups.map((g) => g.id));
        this.initialized = true;
        return { ok: true };
      case 'put-tenant':
        this.tenants.set(c.tenant.id, tenantWithDefaults(c.tenant));
        return { ok: true };
      case 'create-tenant':
        if (this.tenants.has(c.tenant.id))
          return {
            ok: false,
            code: 'TENANT_ALREADY_EXISTS',
            reason: `tenant ${c.tenant.id} already exists`,
          };
        this.tenants.set(c.tenant.id, tenantWithDefaults(c.tenant));
        return { ok: true };
      case 'update-tenant': {
        const current = this.tenants.get(c.tenant.id);
        if (!current)
          return {
            ok: false,
            code: 'TENANT_NOT_FOUND',
            reason: `tenant ${c.tenant.id} does not exist`,
          };
        if (current.updatedAtMs !== c.expectedUpdatedAtMs)
          return {
            ok: false,
            code: 'TENANT_CONFLICT',
            reason: `tenant ${c.tenant.id} changed meanwhile; read it again`,
          };
        this.tenants.set(c.tenant.id, tenantWithDefaults(c.tenant));
        return { ok: true };
      }
      case 'set-api-address': {
        const m = this.members.get(c.id);
        if (!m) return { ok: false, code: 'META_NO_MEMBER', reason: `no member ${c.id}` };
        this.members.set(c.id, {
          ...m,
          apiAddress: c.apiAddress,
          advertisedAddress: c.advertisedAddress ?? '',
        });
        return { ok: true };
      }
      case 'set-preferred-leader': {
        const g = this.groups.get(c.groupId);
        if (!g) return { ok: false, code: 'META_NO_GROUP', reason: `no data group ${c.groupId}` };
        const m = this.members.get(c.node);
        if (!m) return { ok: false, code: 'META_NO_MEMBER', reason: `no member ${c.node}` };
        if (m.state === 'removed')
          return {
            ok: false,
            code: 'META_MEMBER_REMOVED',
            reason: `member ${c.node} was removed`,
          };
        this.groups.set(c.groupId, { ...g, preferredLeader: c.node });
        return { ok: true };
      }
    }
  }

  snapshot(): Uint8Array {
    return encoder.encode(
      JSON.stringify({
        initialized: this.initialized,
        members: [...this.members.values()],
        groups: [...this.groups.values()],
        tenants: [...this.tenants.values()],
        moves: [...this.moves.values()],
        splits: [...this.splits.values()],
        maxGroupId: this.maxGroupId,
        tokens: [...this.tokens.values()],
      }),
    );
  }

  restore(data: Uint8Array): void {
    const s = JSON.parse(decoder.decode(data)) as {
      initialized: boolean;
      members: MemberRecord[];
      groups: GroupRecord[];
      tenants?: TenantRecord[];
      moves?: MoveRecord[];
      splits?: SplitRecord[];
      maxGroupId?: number;
      tokens?: TokenRecord[];
    };
    this.initialized = s.initialized;
    this.members.clear();
    this.groups.clear();
    for (const m of s.members) this.members.set(m.id, m);
    for (const g of s.groups) this.groups.set(g.id, g);
    this.tenants.clear();
    for (const t of s.tenants ?? []) this.tenants.set(t.id, tenantWithDefaults(t));
    this.moves.clear();
    for (const m of s.moves ?? []) this.moves.set(m.groupId, m);
    this.splits.clear();
    for (const sp of s.splits ?? []) this.splits.set(sp.groupId, sp);
    restoreTokens(this, s.tokens ?? []);
    // Snapshots written before splits existed: the highest id of the map is the highest used.
    this.maxGroupId = s.maxGroupId ?? Math.max(0, ...s.groups.map((g) => g.id));
  }
}
