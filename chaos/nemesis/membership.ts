/**
 * The membership nemesis: replica moves made the way an operator makes them, through the gRPC
 * AdminService, while the other nemeses hit the cluster. From its own seeded source (so the
 * draws do not depend on how its calls interleave with the fault schedule) it repeats, with a
 * gap between operations:
 *
 * - `replica-move`: MoveReplica of a drawn replica of a drawn data group to a node that holds
 *   none of that group, followed until ClusterStatus no longer lists the move; `done` when the
 *   layout names the new node and not the old one, otherwise `rolled-back`;
 * - `node-drain`, then `rebalance`: DrainNode rounds on a drawn node until it holds nothing, then
 *   UndrainNode and Rebalance rounds until the planner has nothing left to do (the node gets its
 *   replicas back).
 *
 * A move takes many seconds, so an operation spans several faults of the other families: kills,
 * pauses and partitions land in the middle of moves. Each operation is one fault record, its
 * start before the first call and its end once the cluster no longer shows it in flight, with
 * the outcome in the end record's spec. An operation the faults made fail is recorded as failed,
 * not retried. `settle` is the final heal's part: it undoes a drain left half-way, waits until no
 * move is in flight, and ends every record still open.
 */
import type { ApiClient } from '../../src/api/client.js';
import { SeededRand } from '../../src/base/rand.js';
import type { ProcCluster } from '../../test/helpers/cluster.js';
import type { NemesisKind } from '../history/format.js';

type Msg = Record<string, unknown>;

export type MembershipKind = Extract<NemesisKind, 'replica-move' | 'node-drain' | 'rebalance'>;

/** A membership operation as the fault record describes it. */
export interface MembershipFault {
  readonly faultId: string;
  readonly kind: MembershipKind;
  readonly targets: readonly string[];
  readonly spec: Readonly<Record<string, unknown>>;
}

export interface MembershipNemesisOptions {
  readonly seed: number;
  readonly cluster: ProcCluster;
  /** clients[i] is the API of cluster.nodes[i]. */
  readonly clients: readonly ApiClient[];
  readonly now: () => number;
  readonly nextFaultId: () => string;
  readonly record: (phase: 'start' | 'end', f: MembershipFault) => void;
  /** Gap between two operations, ms. */
  readonly gapMs?: readonly [number, number] | undefined;
  /** How long one operation is followed before it counts as stuck, ms. */
  readonly operationMs?: number;
}

export interface MembershipCounts {
  /** Operations by kind, then by outcome (`done`, `failed`, `rolled-back`, `stuck`, `cut-short`). */
  readonly byKind: Record<string, Record<string, number>>;
  /** Moves started by drains and rebalances (a replica-move is one move of its own). */
  movesStarted: number;
}

export interface SettleReport {
  /** Replica moves still in flight after the final heal's wait (-1: unknown). */
  readonly movesLeft: number;
  /** Data groups whose layout does not list exactly 3 replicas then (-1: unknown). */
  readonly groupsNotAtThree: number;
}

/** Rounds of DrainNode / Rebalance per operation (each round waits for its moves). */
const ROUNDS_MAX = 40;
/** Leader-transfer rounds once no move is left (a transfer that did not hold is planned again). */
const TRANSFER_ROUNDS_MAX = 3;
const CALL_TIMEOUT_MS = 10_000;
const POLL_MS = 500;
/** A move never listed by ClusterStatus for this long is taken as finished (or rolled back). */
const UNSEEN_MOVE_MS = 5000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

class StoppedError extends Error {
  override readonly name = 'StoppedError';
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const text = e.code !== undefined ? `${e.code}: ${e.message ?? ''}` : String(err);
  return text.slice(0, 160);
}

/** Errors a call may meet while leaders move or nodes are down: asking again is right. */
function transient(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? '';
  return /UNAVAILABLE|DEADLINE|NO_LEADER|NOT_LEADER|CANCELLED|INTERNAL|UNKNOWN/.test(code);
}

export class MembershipNemesis {
  private readonly rand: SeededRand;
  private stopping = false;
  /** The final heal's calls run even though the nemesis is stopped. */
  private settling = false;
  /** Records started and not ended yet (ended by the operation, or by `settle`). */
  private readonly open = new Map<string, MembershipFault>();
  /** A node this nemesis drained and has not undrained yet. */
  private drained: string | undefined;
  readonly counts: MembershipCounts = { byKind: {}, movesStarted: 0 };

  constructor(private readonly o: MembershipNemesisOptions) {
    this.rand = new SeededRand(o.seed);
  }

  /** No new operation starts, and the one under way stops at its next call. */
  stop(): void {
    this.stopping = true;
  }

  /** Operations until `until` (driver ms); the one under way then is left to `settle`. */
  async run(until: number): Promise<void> {
    const gap = this.o.gapMs ?? [3000, 10_000];
    const pause = (): Promise<void> => sleep(gap[0] + this.rand.int(gap[1] - gap[0] + 1));
    await pause();
    while (!this.stopping && this.o.now() < until) {
      try {
        if (this.rand.chance(0.65)) await this.moveOne(until);
        else {
          await this.drainOne(until);
          await pause();
          if (this.drained !== undefined) await this.rebalanceBack(until);
        }
      } catch (err) {
        if (!(err instanceof StoppedError)) throw err;
        return; // cut short: settle() ends what is open
      }
      await pause();
    }
  }

  /**
   * The final heal: a node drained and not given back is undrained and rebalanced, every move
   * in flight is waited for (bounded by `timeoutMs`), and every open record ends. Reports the
   * moves still in flight then and the data groups without exactly 3 replicas (-1: no node
   * answered).
   */
  async settle(timeoutMs: number): Promise<SettleReport> {
    this.stopping = true;
    this.settling = true;
    const deadline = this.o.now() + timeoutMs;
    // Nodes restarted by the heal may not answer yet: the undrain is asked until it is taken.
    while (this.drained !== undefined && this.o.now() < deadline) {
      await this.rebalanceBack(deadline).catch((err: unknown) => {
        if (!(err instanceof StoppedError)) throw err;
      });
      if (this.drained !== undefined) await sleep(POLL_MS);
    }
    const movesLeft = await this.waitNoMoves(deadline).catch(() => -1);
    for (const [id, f] of [...this.open])
      this.end(id, f, { outcome: movesLeft === 0 ? 'cut-short' : 'stuck', movesLeft });
    const st = await this.call<Msg>('ClusterStatus', {}, deadline + 30_000).catch(() => undefined);
    const groupsNotAtThree =
      st === undefined
        ? -1
        : (st['groups'] as Msg[]).filter(
            (g) => Number(g['groupId']) !== 0 && (g['replicas'] as Msg[]).length !== 3,
          ).length;
    return { movesLeft, groupsNotAtThree };
  }

  // ---- operations -------------------------------------------------------------------------

  private async moveOne(until: number): Promise<void> {
    const st = await this.call<Msg>('ClusterStatus', {}, until).catch(() => undefined);
    if (st === undefined) return;
    const nodeIds = (st['nodes'] as Msg[])
      .filter((n) => n['state'] === 'active')
      .map((n) => String(n['id']));
    const busy = new Set((st['moves'] as Msg[]).map((m) => Number(m['groupId'])));
    const groups = (st['groups'] as Msg[]).filter(
      (g) => Number(g['groupId']) !== 0 && !busy.has(Number(g['groupId'])),
    );
    if (groups.length === 0) return;
    const g = groups[this.rand.int(groups.length)]!;
    const groupId = Number(g['groupId']);
    const replicas = (g['replicas'] as Msg[]).map((r) => String(r['nodeId']));
    const spare = nodeIds.filter((n) => !replicas.includes(n));
    if (spare.length === 0 || replicas.length === 0) return;
    const from = replicas[this.rand.int(replicas.length)]!;
    const to = spare[this.rand.int(spare.length)]!;
    const f = this.begin('replica-move', [from, to], { groupId, from, to });
    const startT = this.o.now();
    try {
      await this.call('MoveReplica', { groupId, fromNode: from, toNode: to }, until);
    } catch (err) {
      if (err instanceof StoppedError) throw err;
      this.end(f.faultId, f, { outcome: 'failed', error: describe(err) });
      return;
    }
    const deadline = Math.min(until, startT + (this.o.operationMs ?? 150_000));
    await this.waitMoveGone(groupId, deadline, until);
    const after = await this.call<Msg>('ClusterStatus', {}, until);
    const ga = (after['groups'] as Msg[]).find((x) => Number(x['groupId']) === groupId);
    const now = (ga?.['replicas'] as Msg[] | undefined)?.map((r) => String(r['nodeId'])) ?? [];
    const still = (after['moves'] as Msg[]).some((m) => Number(m['groupId']) === groupId);
    const outcome = still
      ? 'stuck'
      : now.includes(to) && !now.includes(from)
        ? 'done'
        : 'rolled-back';
    this.end(f.faultId, f, { outcome, replicas: now, ms: Math.round(this.o.now() - startT) });
  }

  private async drainOne(until: number): Promise<void> {
    const st = await this.call<Msg>('ClusterStatus', {}, until).catch(() => undefined);
    if (st === undefined) return;
    const active = (st['nodes'] as Msg[])
      .filter((n) => n['state'] === 'active')
      .map((n) => String(n['id']));
    // Keep three active nodes besides: every group keeps its three replicas.
    if (active.length < 4) return;
    const node = active[this.rand.int(active.length)]!;
    const f = this.begin('node-drain', [node], { node });
    this.drained = node;
    const r = await this.rounds(until, (max) =>
      this.call<Msg>('DrainNode', { nodeId: node, maxConcurrentMoves: max }, until),
    );
    this.end(f.faultId, f, r);
  }

  private async rebalanceBack(until: number): Promise<void> {
    // Past the end nothing starts: settle() gives the node back under a record of its own.
    if (this.o.now() >= until) throw new StoppedError('rebalance');
    const node = this.drained!;
    const f = this.begin('rebalance', [node], { node });
    try {
      await this.call('UndrainNode', { nodeId: node }, until);
    } catch (err) {
      if (err instanceof StoppedError) throw err;
      this.end(f.faultId, f, { outcome: 'failed', error: `UndrainNode: ${describe(err)}` });
      return;
    }
    this.drained = undefined;
    const r = await this.rounds(until, (max) =>
      this.call<Msg>('Rebalance', { maxConcurrentMoves: max }, until),
    );
    this.end(f.faultId, f, r);
  }

  /** DrainNode or Rebalance rounds until the plan is empty; the outcome for the end record. */
  private async rounds(
    until: number,
    round: (maxConcurrentMoves: number) => Promise<Msg>,
  ): Promise<Record<string, unknown>> {
    const startT = this.o.now();
    const deadline = Math.min(until, startT + (this.o.operationMs ?? 150_000) * 2);
    const max = 1 + this.rand.int(2);
    let moves = 0;
    let transfers = 0;
    let transferRounds = 0;
    for (let i = 0; i < ROUNDS_MAX; i++) {
      let res: Msg;
      try {
        res = await round(max);
      } catch (err) {
        if (err instanceof StoppedError) throw err;
        return { outcome: 'failed', moves, transfers, error: describe(err) };
      }
      const started = (res['started'] as Msg[]).length;
      const inFlight = (res['inFlight'] as Msg[]).length;
      const done = (res['transferred'] as Msg[]).length;
      moves += started;
      this.counts.movesStarted += started;
      transfers += done;
      if (started > 0 || inFlight > 0) {
        if ((await this.waitNoMoves(deadline, until)) > 0) {
          // The run ended with moves in flight: the record stays open for settle().
          if (this.o.now() >= until) throw new StoppedError('rounds');
          return { outcome: 'stuck', moves, transfers, ms: Math.round(this.o.now() - startT) };
        }
        continue;
      }
      if (done > 0 && ++transferRounds < TRANSFER_ROUNDS_MAX) continue;
      return { outcome: 'done', moves, transfers, ms: Math.round(this.o.now() - startT) };
    }
    return { outcome: 'stuck', moves, transfers, error: `not done after ${ROUNDS_MAX} rounds` };
  }

  // ---- waiting and calling ----------------------------------------------------------------

  /**
   * Waits until ClusterStatus no longer lists the group's move. ClusterStatus answers from the
   * asked node's own copy of the meta group, which may not have the move yet: a move counts as
   * gone once it was listed and is not any more, or when it was never listed for a while.
   */
  private async waitMoveGone(groupId: number, deadline: number, until: number): Promise<void> {
    const unseenUntil = this.o.now() + UNSEEN_MOVE_MS;
    let seen = false;
    while (this.o.now() < deadline) {
      const st = await this.call<Msg>('ClusterStatus', {}, until).catch((err: unknown) => {
        if (err instanceof StoppedError) throw err;
        return undefined;
      });
      if (st) {
        const listed = (st['moves'] as Msg[]).some((m) => Number(m['groupId']) === groupId);
        if (listed) seen = true;
        else if (seen || this.o.now() >= unseenUntil) return;
      }
      await sleep(POLL_MS);
    }
  }

  /** Waits until ClusterStatus lists no move; the moves still listed at the deadline. */
  private async waitNoMoves(deadline: number, until = deadline): Promise<number> {
    let left = -1;
    while (this.o.now() < deadline) {
      const st = await this.call<Msg>('ClusterStatus', {}, until).catch((err: unknown) => {
        if (err instanceof StoppedError) throw err;
        return undefined;
      });
      if (st) {
        left = (st['moves'] as Msg[]).length;
        if (left === 0) return 0;
      }
      await sleep(POLL_MS);
    }
    return left;
  }

  /**
   * One AdminService call through a node that runs, asked again through another one while the
   * answer is transient, until `until` (then StoppedError: the operation is left to `settle`).
   */
  private async call<T>(method: string, req: Msg, until: number): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      if ((this.stopping && !this.settling) || this.o.now() >= until)
        throw new StoppedError(method);
      const up = this.o.cluster.nodes.filter((n) => n.running && !n.paused);
      const via = up[attempt % Math.max(1, up.length)] ?? this.o.cluster.nodes[0]!;
      const client = this.o.clients[this.o.cluster.nodes.indexOf(via)] ?? this.o.clients[0]!;
      try {
        return await client.call<T>('AdminService', method, req, CALL_TIMEOUT_MS);
      } catch (err) {
        if (!transient(err) || attempt >= 20) throw err;
        await sleep(POLL_MS);
      }
    }
  }

  // ---- records ----------------------------------------------------------------------------

  private begin(
    kind: MembershipKind,
    targets: readonly string[],
    spec: Record<string, unknown>,
  ): MembershipFault {
    const f = { faultId: this.o.nextFaultId(), kind, targets, spec };
    this.open.set(f.faultId, f);
    this.o.record('start', f);
    return f;
  }

  private end(id: string, f: MembershipFault, result: Record<string, unknown>): void {
    if (!this.open.delete(id)) return;
    this.o.record('end', { ...f, spec: { ...f.spec, ...result } });
    const outcome = String(result['outcome']);
    const byKind = (this.counts.byKind[f.kind] ??= {});
    byKind[outcome] = (byKind[outcome] ?? 0) + 1;
  }
}
