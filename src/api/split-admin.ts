/**
 * Range splits on the API side. A split of group G is recorded in the meta group in two steps
 * (src/placement/split-state.ts) and carried through by the SplitDriver on the meta leader,
 * which keeps nothing it needs in memory: every pass it reads the splits in flight from the meta
 * group and, for each, asks G's leader to commit the split entry (NodeService.SplitGroup: it
 * drains G's in-flight deliveries first, then proposes; a split entry applied twice is a no-op),
 * then commits finish-split. A crash of any node, the meta leader included, leaves a recorded
 * split that the next meta leader carries on from the start; both steps are idempotent.
 *
 * The driver also triggers splits: every few seconds it asks each data group's leader how many
 * jobs it holds and how fast it fires (GroupMembership: the leader's figures) and begins a split
 * of a group above `--split-jobs` or `--split-fire-rate`.
 */
import { TickraftError, ValidationError } from '../base/errors.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { encodeMetaCommand, type MetaResult } from '../placement/meta-state.js';
import { encodeSplitEntry, type SplitEntry, type SplitRecord } from '../placement/split-state.js';
import { NotLeaderError } from '../raft/errors.js';
import type { ApiContext } from './api-context.js';
import { groupMembershipLocal } from './membership-admin.js';
import type { Msg } from './convert.js';
import { RouteStaleError, type CallContext } from './router.js';
import { num, type ApiLogger } from './service-kit.js';
import { GroupUnavailableError } from './status-map.js';

export class SplitError extends TickraftError {
  override readonly name = 'SplitError';
}

/** Longest the parent's leader waits for its in-flight deliveries before the split entry. */
export const SPLIT_DRAIN_MAX_MS = 5000;

/** Commits a meta split command on this node (the meta leader); a refusal becomes its error. */
async function proposeSplitMeta(
  api: ApiContext,
  c:
    | { op: 'begin-split'; groupId: number }
    | { op: 'finish-split'; groupId: number; childId: number },
): Promise<SplitRecord | undefined> {
  const r = (await api.node.host.propose(META_GROUP_ID, encodeMetaCommand(c))) as MetaResult;
  if (!r.ok) throw new SplitError(r.code, r.reason);
  return r.split;
}

/** AdminService.SplitGroup on the meta leader: records the split; the driver carries it out. */
export async function beginSplitLocal(api: ApiContext, req: Msg): Promise<Msg> {
  const groupId = num(req, 'groupId');
  const split = await proposeSplitMeta(api, { op: 'begin-split', groupId });
  if (!split) throw new SplitError('META_NO_SPLIT', `group ${groupId} was not split`);
  return {
    groupId,
    childGroupId: split.childId,
    mid: split.mid,
    start: split.start,
    end: split.end,
  };
}

/** Validates a SplitGroup request against this node's meta state (begin-split checks again). */
export function checkSplitRequest(api: ApiContext, req: Msg): void {
  const groupId = req['groupId'];
  if (
    typeof groupId !== 'number' ||
    groupId === META_GROUP_ID ||
    !api.node.meta.groups.has(groupId)
  )
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'groupId', reason: `no data group ${String(groupId)}` },
    ]);
}

/**
 * NodeService.SplitGroup on the parent's leader: drain the group's deliveries (so none of a job
 * that moves is in flight when the split commits), commit the split entry, dispatch again.
 * Resolves once the entry has applied here, with how many jobs moved.
 */
export async function splitGroupLocal(api: ApiContext, groupId: number, req: Msg): Promise<Msg> {
  const entry: SplitEntry = {
    childId: num(req, 'childGroupId'),
    start: num(req, 'start'),
    mid: num(req, 'mid'),
    end: num(req, 'end'),
  };
  const g = api.node.host.groups.get(groupId);
  if (!g?.isLeader) throw new NotLeaderError(groupId, g?.leaderId ?? '');
  await api.node.scheduler.drain(groupId, SPLIT_DRAIN_MAX_MS);
  try {
    const r = (await api.node.host.propose(groupId, encodeSplitEntry(entry))) as
      | { ok: true; childId: number; movedJobs: number }
      | { ok: false; code: string; reason: string };
    if (!r.ok) throw new SplitError(r.code, r.reason);
    return { childGroupId: r.childId, movedJobs: r.movedJobs };
  } finally {
    api.node.scheduler.endDrain(groupId);
  }
}

export interface SplitDriverOptions {
  /** How often the meta leader looks at the splits in flight. @default 250 */
  readonly everyMs?: number;
  /** How often it asks the groups for their job counts and fire rates (automatic splits). @default 2000 */
  readonly checkEveryMs?: number;
}

export class SplitDriver {
  private timer: NodeJS.Timeout | undefined;
  private readonly busy = new Set<number>();
  private checking = false;
  private lastCheckMs = 0;
  private readonly everyMs: number;
  private readonly checkEveryMs: number;
  /** Splits this driver carried out (for logs and tests). */
  readonly stats = { finished: 0, triggered: 0 };

  constructor(
    private readonly api: ApiContext,
    private readonly log: ApiLogger,
    opts: SplitDriverOptions = {},
  ) {
    this.everyMs = opts.everyMs ?? 250;
    this.checkEveryMs = opts.checkEveryMs ?? 2000;
  }

  start(): void {
    this.timer = setInterval(() => this.pass(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private ctx(): CallContext {
    return { deadlineMs: Date.now() + 15_000, forwarded: false, route: undefined };
  }

  private pass(): void {
    const meta = this.api.node.host.groups.get(META_GROUP_ID);
    if (!meta?.isLeader) return;
    for (const split of this.api.node.meta.splits.values()) {
      if (this.busy.has(split.groupId)) continue;
      this.busy.add(split.groupId);
      this.carry(split)
        .catch((err: unknown) => {
          // The next pass tries again (the parent's leader changed, a node is restarting).
          this.log.warn(
            { group: split.groupId, err: String(err) },
            'split step failed; will retry',
          );
        })
        .finally(() => this.busy.delete(split.groupId));
    }
    const now = Date.now();
    const cfg = this.api.node.config;
    if (
      (cfg.splitJobs > 0 || cfg.splitFireRate > 0) &&
      !this.checking &&
      now - this.lastCheckMs >= this.checkEveryMs
    ) {
      this.lastCheckMs = now;
      this.checking = true;
      this.checkBounds()
        .catch((err: unknown) => this.log.warn({ err: String(err) }, 'split check failed'))
        .finally(() => {
          this.checking = false;
        });
    }
  }

  /** Commits the split entry in the parent (idempotent), then finish-split in the meta group. */
  private async carry(split: SplitRecord): Promise<void> {
    const req = {
      groupId: split.groupId,
      childGroupId: split.childId,
      start: split.start,
      mid: split.mid,
      end: split.end,
    };
    this.log.info(
      { group: split.groupId, child: split.childId, mid: split.mid },
      'split: parent entry',
    );
    const r = await this.api.onGroup(
      this.ctx(),
      split.groupId,
      'NodeService',
      'SplitGroup',
      req,
      () => splitGroupLocal(this.api, split.groupId, req),
    );
    await proposeSplitMeta(this.api, {
      op: 'finish-split',
      groupId: split.groupId,
      childId: split.childId,
    });
    this.stats.finished++;
    this.log.info(
      { group: split.groupId, child: split.childId, movedJobs: r['movedJobs'] },
      'split: finished',
    );
  }

  /**
   * Begins a split of every group (without a move or split in flight) above a bound: its job
   * count or its fire rate, both as its leader reports them. One group at a time: each begin
   * is committed before the next group is looked at.
   */
  private async checkBounds(): Promise<void> {
    const { splitJobs, splitFireRate } = this.api.node.config;
    const meta = this.api.node.meta;
    for (const g of [...meta.groups.values()]) {
      if (meta.splits.has(g.id) || meta.moves.has(g.id)) continue;
      const facts = await this.api.onGroup(
        this.ctx(),
        g.id,
        'NodeService',
        'GroupMembership',
        { groupId: g.id },
        () => groupMembershipLocal(this.api, g.id),
      );
      const jobs = Number(facts['jobCount'] ?? 0);
      const fireRate = Number(facts['fireRatePerSec'] ?? 0);
      const bound = splitBoundPassed(jobs, fireRate, splitJobs, splitFireRate);
      if (bound === undefined) continue;
      this.log.info(
        { group: g.id, jobs, fireRatePerSec: round2(fireRate), splitJobs, splitFireRate, bound },
        `split: group above ${bound}`,
      );
      await proposeSplitMeta(this.api, { op: 'begin-split', groupId: g.id });
      this.stats.triggered++;
    }
  }
}

/**
 * Which automatic-split bound a group passes, by the flag that sets it, or undefined; a bound
 * of 0 is off. The job count is named first when both are passed.
 */
export function splitBoundPassed(
  jobs: number,
  fireRatePerSec: number,
  splitJobs: number,
  splitFireRate: number,
): '--split-jobs' | '--split-fire-rate' | undefined {
  if (splitJobs > 0 && jobs > splitJobs) return '--split-jobs';
  if (splitFireRate > 0 && fireRatePerSec > splitFireRate) return '--split-fire-rate';
  return undefined;
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}

/** How often a cross-group list starts again when the group map changed while it ran. */
export const LIST_ROUNDS_MAX = 3;

/**
 * Runs a cross-group list over the ring as this node routes it, again from the start if the
 * ring changed meanwhile (a split finished: a child the list did not ask now owns part of the
 * range, and its parent answered only for its own half). Lists spanning every group (ListJobs)
 * are thereby complete across a split.
 */
export async function listAcrossGroups<T>(
  api: ApiContext,
  list: (ranges: readonly { groupId: number }[]) => Promise<T>,
): Promise<T> {
  for (let round = 1; ; round++) {
    const before = ringSignature(api);
    const out = await list(api.admin.ranges());
    if (ringSignature(api) === before) return out;
    if (round >= LIST_ROUNDS_MAX)
      throw new GroupUnavailableError(
        META_GROUP_ID,
        `the group map changed ${round} times during the list; try again`,
      );
  }
}

function ringSignature(api: ApiContext): string {
  return [...api.node.meta.groups.values()].map((g) => `${g.id}:${g.epoch}`).join(',');
}

/**
 * On a group's leader, for a list call about the group: its own answer, plus the answers of the
 * groups split off it whose split has applied here but that the meta map does not list yet
 * (finish-split not committed or not applied here): no router asks those, so the parent answers
 * for them until the map names them. The caller routed by the parent's epoch, and the epoch
 * changes at finish-split; if it changed while this ran, ROUTE_STALE sends the caller back to
 * its (refreshed) map, so a child is never listed twice nor left out.
 */
export async function answerForChildren<T>(
  api: ApiContext,
  ctx: CallContext,
  groupId: number,
  own: () => Promise<T>,
  ofChild: (ctx: CallContext, childId: number) => Promise<T>,
): Promise<{ own: T; children: T[] }> {
  const epochOf = (): number | undefined => api.node.meta.groups.get(groupId)?.epoch;
  const epoch = epochOf();
  const mine = await own();
  // After own(): its ReadIndex applied every split entry committed before the call.
  const pending = (api.node.data.get(groupId)?.childIds ?? []).filter(
    (c) => !api.node.meta.groups.has(c),
  );
  // A call of its own (not "forwarded": the child is another group, its leader may be elsewhere),
  // within the caller's deadline.
  const childCtx: CallContext = { deadlineMs: ctx.deadlineMs, forwarded: false, route: undefined };
  const children = await Promise.all(pending.map((c) => ofChild(childCtx, c)));
  if (epochOf() !== epoch)
    throw new RouteStaleError(
      'ROUTE_STALE',
      `group ${groupId}'s epoch changed during the call (a split finished); routing again`,
    );
  return { own: mine, children };
}
