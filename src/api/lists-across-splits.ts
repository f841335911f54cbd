/**
 * Lists across a split (docs/ARCHITECTURE.md, Splitting a group): a list spanning every group
 * starts again when the group map changed while it ran, and a parent's leader answers for the
 * children split off it that the meta map does not list yet. So a job is neither left out of a
 * list nor listed twice while a split is carried out (src/cluster/split-admin.ts).
 */
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import type { ApiContext } from './api-context.js';
import { RouteStaleError, type CallContext } from './router.js';
import { GroupUnavailableError } from './status-map.js';

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
