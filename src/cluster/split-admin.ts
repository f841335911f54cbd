/**
 * Range splits. A split of group G is recorded in the meta group in two steps
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
import { num, type Msg } from '../base/fields.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { encodeMetaCommand, type MetaResult } from '../placement/meta-state.js';
import { encodeSplitEntry, type SplitEntry, type SplitRecord } from '../placement/split-state.js';
import { NotLeaderError } from '../raft/errors.js';
import type { ClusterContext, ClusterLogger, OpContext } from './cluster-context.js';
import { groupMembershipLocal } from './membership-admin.js';

export class SplitError extends TickraftError {
  override readonly name = 'SplitError';
}

/** Longest the parent's leader waits for its in-flight deliveries before the split entry. */
export const SPLIT_DRAIN_MAX_MS = 5000;

/** Commits a meta split command on this node (the meta leader); a refusal becomes its error. */
async function proposeSplitMeta(
  api: ClusterContext,
  c:
    | { op: 'begin-split'; groupId: number }
    | { op: 'finish-split'; groupId: number; childId: number },
): Promise<SplitRecord | undefined> {
  const r = (await api.node.host.propose(META_GROUP_ID, encodeMetaCommand(c))) as MetaResult;
  if (!r.ok) throw new SplitError(r.code, r.reason);
  return r.split;
}

/** AdminService.SplitGroup on the meta leader: records the split; the driver carries it out. */
export async function beginSplitLocal(api: ClusterContext, req: Msg): Promise<Msg> {
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
export function checkSplitRequest(api: ClusterContext, req: Msg): void {
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
export async function splitGroupLocal(
  api: ClusterContext,
  groupId: number,
  req: Msg,
): Promise<Msg> {
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
    private readonly api: ClusterContext,
    private readonly log: ClusterLogger,
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

  private ctx(): OpContext {
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
