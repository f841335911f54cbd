/**
 * Routing: any node accepts any call. A call for a group this node leads runs here; otherwise
 * it is forwarded over gRPC to the group leader's client API address (recorded in the meta
 * group), with the caller's remaining deadline; a node that holds no replica of the group (or
 * one that knows no leader yet) asks the group's recorded replicas in turn. One retry covers the usual transients: the
 * leader changed between the lookup and the call, the group had no leader for a moment, or the
 * forwarding node's ring was stale (the receiver answers ROUTE_STALE when the group or epoch
 * it would route to differs from the one the sender named).
 *
 * A forwarded call is never forwarded again: a receiver that does not lead answers "not the
 * leader" with its hint and the sender, which holds the caller's deadline, retries.
 */
import * as grpc from '@grpc/grpc-js';
import { assertionFailed } from '../base/assert.js';
import { DeadlineError, TickraftError } from '../base/errors.js';
import type { Principal } from '../auth/principal.js';
import { AUTHORIZATION_METADATA, bearerHeader } from '../auth/token-secret.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { NotLeaderError } from '../raft/errors.js';
import type { ApiNode } from './api-node.js';
import { principalOf } from './call-principal.js';
import { askReplicasInTurn } from './replica-walk.js';
import { GroupUnavailableError, isServiceError } from './status-map.js';

export const FORWARDED_HEADER = 'tickraft-forwarded';
export const ROUTE_HEADER = 'tickraft-route';
/** Bound on one forwarded call when the caller set no deadline. */
export const FORWARD_TIMEOUT_MS = 30_000;
/** Pause before the single retry: about one election timeout at the default tick. */
export const RETRY_PAUSE_MS = 150;

/** What a handler knows about the call it serves. */
export interface CallContext {
  /** Absolute deadline (ms since epoch); Infinity when the caller set none. */
  readonly deadlineMs: number;
  /** The call came from another node's router. */
  readonly forwarded: boolean;
  /** The `group:epoch` the forwarding node routed by, if any. */
  readonly route: string | undefined;
  /**
   * Who made the call (auth-guard.ts); absent for the node's own calls (its drivers and
   * registrations), which act as the admin.
   */
  readonly principal?: Principal | undefined;
  /** The caller's `authorization` metadata, passed on when the call is forwarded. */
  readonly authorization?: string | undefined;
}

export function contextOf(call: grpc.ServerUnaryCall<unknown, unknown>): CallContext {
  const d = call.getDeadline();
  const deadlineMs = d instanceof Date ? d.getTime() : d;
  const route = call.metadata.get(ROUTE_HEADER)[0];
  const principal = principalOf(call);
  // Every served method is behind the guard; a call without a principal is a wiring bug, and
  // acting as the node itself (the admin) would fail open.
  if (principal === undefined) assertionFailed('a call reached its handler without a principal');
  const authorization = call.metadata.get(AUTHORIZATION_METADATA)[0];
  return {
    deadlineMs,
    forwarded: call.metadata.get(FORWARDED_HEADER).length > 0,
    route: typeof route === 'string' ? route : undefined,
    principal,
    authorization: typeof authorization === 'string' ? authorization : undefined,
  };
}

/** A method of a loaded service, for forwarding. */
export interface MethodRef {
  readonly service: grpc.ServiceClientConstructor;
  readonly name: string;
}

export class RouteStaleError extends TickraftError {
  override readonly name = 'RouteStaleError';
}

export class Router {
  private readonly clients = new Map<string, grpc.Client>();

  constructor(
    private readonly node: ApiNode,
    /**
     * The bootstrap admin token, which nodes present to each other for their own calls;
     * undefined when nodes run without authentication.
     */
    private readonly nodeToken: string | undefined,
  ) {}

  epochOf(groupId: number): number {
    return this.node.meta.groups.get(groupId)?.epoch ?? 0;
  }

  /**
   * Runs `local` when this node leads `groupId`, else forwards `method(request)` to the leader.
   * Retries once on a leader change, a missing leader or a stale route.
   */
  async onGroup<T>(
    ctx: CallContext,
    group: number | (() => number),
    local: () => Promise<T>,
    method: MethodRef,
    request: unknown,
  ): Promise<T> {
    // A call about one job names the group by a function: after a stale route (the group's
    // range was split) the retry looks the job up again in the refreshed map.
    const groupNow = typeof group === 'number' ? () => group : group;
    let groupId = groupNow();
    if (ctx.forwarded && ctx.route !== undefined) {
      const mine = `${groupId}:${this.epochOf(groupId)}`;
      if (ctx.route !== mine)
        throw new RouteStaleError(
          'ROUTE_STALE',
          `routed as group:epoch ${ctx.route}, but this node routes it as ${mine}`,
        );
    }
    for (let attempt = 0; ; attempt++) {
      const last = attempt === 1;
      checkDeadline(ctx, 'before routing');
      const g = this.node.host.groups.get(groupId);
      try {
        if (g?.isLeader) return await withDeadline(ctx, local());
        // A forwarded call stops here: the sender holds the deadline and retries.
        if (ctx.forwarded) throw new NotLeaderError(groupId, g?.leaderId ?? '');
        const leader = g?.leaderId ?? '';
        if (leader === '') return await this.forwardToReplicas<T>(groupId, method, request, ctx);
        const address = this.node.meta.members.get(leader)?.apiAddress ?? '';
        if (address === '')
          throw new GroupUnavailableError(
            groupId,
            `the API address of leader ${leader} is not registered yet`,
          );
        return await this.forward<T>(address, method, request, ctx, groupId);
      } catch (err) {
        if (last || ctx.forwarded || !retryable(err)) throw asRelayed(err, groupId);
        if (codeOf(err) === 'ROUTE_STALE' && this.node.host.groups.has(META_GROUP_ID))
          await this.node.host.read(META_GROUP_ID).catch(() => undefined);
        await sleep(Math.min(RETRY_PAUSE_MS, Math.max(0, ctx.deadlineMs - Date.now())));
        groupId = groupNow();
      }
    }
  }

  /**
   * A group this node does not host (with more nodes than replicas, most nodes hold only some
   * groups), or whose replica here knows no leader (a fresh replica a move is adding here): the
   * group's replicas are asked in turn (replica-walk.ts: the recorded ones, then a move's new
   * replica, following "not the leader" hints); the leader serves the call.
   */
  private forwardToReplicas<T>(
    groupId: number,
    method: MethodRef,
    request: unknown,
    ctx: CallContext,
  ): Promise<T> {
    const meta = this.node.meta;
    const candidates = [...this.replicasOf(groupId)];
    const moving = meta.moves.get(groupId)?.to;
    if (moving !== undefined) candidates.push(moving);
    const addressOf = (id: string): string =>
      id === this.node.id ? '' : (meta.members.get(id)?.apiAddress ?? '');
    return askReplicasInTurn<T>(
      candidates.filter((id) => addressOf(id) !== ''),
      {
        ask: (id) => {
          const address = addressOf(id);
          if (address === '')
            return Promise.reject(new GroupUnavailableError(groupId, `${id} has no API address`));
          return this.forward<T>(address, method, request, ctx, groupId);
        },
        retryable,
        leaderHintOf,
      },
      new GroupUnavailableError(groupId, 'no leader known'),
    );
  }

  /**
   * The group's replicas as the meta group records them; a group a split in flight is creating
   * (not in the map until finish-split) lives on its parent's replicas.
   */
  private replicasOf(groupId: number): readonly string[] {
    const g = this.node.meta.groups.get(groupId);
    if (g) return g.replicas;
    for (const split of this.node.meta.splits.values())
      if (split.childId === groupId)
        return this.node.meta.groups.get(split.groupId)?.replicas ?? [];
    return [];
  }

  /** Calls `method` on the node at `address` with the caller's remaining deadline. */
  forward<T>(
    address: string,
    method: MethodRef,
    request: unknown,
    ctx: CallContext,
    groupId: number | undefined,
  ): Promise<T> {
    const def = method.service.service[method.name];
    if (!def) throw new Error(`unknown method ${method.name}`);
    const md = new grpc.Metadata();
    md.set(FORWARDED_HEADER, '1');
    // A public method forwarded carries the caller's own credentials, checked again by the
    // receiver: a forwarded call can do no more than it could at the receiver directly. The
    // node-to-node methods (which this node calls on the caller's behalf once it has checked
    // the caller, naming the tenant in the request) and the node's own calls carry the admin
    // token.
    const internal = def.path.startsWith('/tickraft.internal.');
    const nodeAuthorization =
      this.nodeToken === undefined ? undefined : bearerHeader(this.nodeToken);
    const authorization = internal ? nodeAuthorization : (ctx.authorization ?? nodeAuthorization);
    if (authorization !== undefined) md.set(AUTHORIZATION_METADATA, authorization);
    if (groupId !== undefined) md.set(ROUTE_HEADER, `${groupId}:${this.epochOf(groupId)}`);
    const deadline = Math.min(ctx.deadlineMs, Date.now() + FORWARD_TIMEOUT_MS);
    const client = this.client(address);
    return new Promise<T>((resolve, reject) => {
      client.makeUnaryRequest(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        request,
        md,
        { deadline },
        (err, res) => {
          if (err) reject(err);
          else resolve(res as T);
        },
      );
    });
  }

  /**
   * Opens `method`'s server stream on the node at `address` (the group's leader) with the
   * caller's credentials, for a call this node does not serve itself (WatchRuns); the caller
   * relays its messages and its end.
   */
  forwardServerStream(
    address: string,
    method: MethodRef,
    request: unknown,
    ctx: CallContext,
    groupId: number,
  ): grpc.ClientReadableStream<unknown> {
    const def = method.service.service[method.name];
    if (!def) throw new Error(`unknown method ${method.name}`);
    const md = new grpc.Metadata();
    md.set(FORWARDED_HEADER, '1');
    const authorization =
      ctx.authorization ??
      (this.nodeToken === undefined ? undefined : bearerHeader(this.nodeToken));
    if (authorization !== undefined) md.set(AUTHORIZATION_METADATA, authorization);
    md.set(ROUTE_HEADER, `${groupId}:${this.epochOf(groupId)}`);
    return this.client(address).makeServerStreamRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      request,
      md,
      Number.isFinite(ctx.deadlineMs) ? { deadline: ctx.deadlineMs } : {},
    );
  }

  /** The API address of the group's leader as this node knows it; '' when it knows none. */
  leaderAddress(groupId: number): string {
    const leader = this.node.host.groups.get(groupId)?.leaderId ?? '';
    return leader === '' ? '' : (this.node.meta.members.get(leader)?.apiAddress ?? '');
  }

  private client(address: string): grpc.Client {
    let c = this.clients.get(address);
    if (!c) {
      // TLS when the client API serves it (src/transport/tls.ts builds the credentials).
      c = new grpc.Client(
        address,
        this.node.apiDialCredentials ?? grpc.credentials.createInsecure(),
        {
          'grpc.enable_channelz': 0,
          // A leader's node that was down (a restart) is dialled again within a second of its
          // return, not after grpc-js's default backoff of up to two minutes: until then every
          // call forwarded to it would fail as if it were still down.
          'grpc.initial_reconnect_backoff_ms': 100,
          'grpc.max_reconnect_backoff_ms': 1000,
        },
      );
      this.clients.set(address, c);
    }
    return c;
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

/**
 * What the caller is told when forwarding failed. A leader's node that did not answer (its
 * connection refused or dropped) becomes GROUP_NO_LEADER: relayed as it came, gRPC's "no
 * connection established" would tell the caller that its own request never left, when an
 * earlier attempt may have reached the leader and been applied (a leader killed mid-call).
 */
export function asRelayed(err: unknown, groupId: number): unknown {
  if (isServiceError(err) && err.code === grpc.status.UNAVAILABLE && codeOf(err) === undefined)
    return new GroupUnavailableError(
      groupId,
      "its leader's node did not answer; a request forwarded to it may have been applied",
    );
  return err;
}

/** The leader a forwarded call's "not the leader" answer names. */
function leaderHintOf(err: unknown): string | undefined {
  if (err instanceof NotLeaderError) return err.leaderHint || undefined;
  if (!isServiceError(err)) return undefined;
  const hint = err.metadata.get('tickraft-leader')[0];
  return typeof hint === 'string' && hint !== '' ? hint : undefined;
}

export function codeOf(err: unknown): string | undefined {
  if (err instanceof TickraftError) return err.code;
  if (isServiceError(err)) {
    const c = err.metadata.get('tickraft-error-code')[0];
    return typeof c === 'string' ? c : undefined;
  }
  return undefined;
}

/**
 * Worth one retry: the leader moved or is being elected, the route was stale, or the leader's
 * node did not answer. A proposal whose outcome is unknown is not retried here (only the client
 * knows whether its request is idempotent).
 */
export function retryable(err: unknown): boolean {
  const code = codeOf(err);
  if (code === 'RAFT_PROPOSAL_UNKNOWN') return false;
  if (code !== undefined)
    return [
      'RAFT_NOT_LEADER',
      'RAFT_PROPOSAL_DROPPED',
      'RAFT_READ_FAILED',
      'GROUP_NO_LEADER',
      'ROUTE_STALE',
    ].includes(code);
  // A forwarded call that never reached a server (connection refused: the leader just died).
  return isServiceError(err) && err.code === grpc.status.UNAVAILABLE;
}

export function checkDeadline(ctx: CallContext, what: string): void {
  if (Date.now() >= ctx.deadlineMs) throw new DeadlineError(what);
}

/**
 * Waits for `p` no longer than the caller's deadline. A write still in flight may commit after
 * the caller gave up; request ids make the retry safe.
 */
export function withDeadline<T>(ctx: CallContext, p: Promise<T>): Promise<T> {
  if (!Number.isFinite(ctx.deadlineMs)) return p;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new DeadlineError('while waiting for the group')),
      Math.max(0, ctx.deadlineMs - Date.now()),
    );
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
