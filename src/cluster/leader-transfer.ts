/**
 * TransferLeader: records the new leader as the group's preferred one in the meta group (so
 * leader balancing does not hand the group back), hands the group over (a data group drains
 * first) and waits until the new leader leads.
 */
import { DeadlineError, ValidationError } from '../base/errors.js';
import { num, str, type Msg } from '../base/fields.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { sleep, type ClusterContext, type OpContext } from './cluster-context.js';
import { proposeMeta } from './membership-admin.js';

/** TransferLeader waits at most this long for the new leader when the caller set no deadline. */
export const TRANSFER_WAIT_MS = 10_000;

export async function transferLeader(api: ClusterContext, ctx: OpContext, req: Msg): Promise<Msg> {
  const groupId = num(req, 'groupId');
  const to = str(req, 'toNode');
  const g = api.node.host.groups.get(groupId);
  const voters = g ? [...g.node.status().confState.voters] : [];
  if (!voters.includes(to))
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'toNode', reason: `must be a voter of group ${groupId} (${voters.join(', ')})` },
    ]);
  // A data group's new place is recorded first: leader balancing on the new leader would
  // otherwise hand the group back to its bootstrap plan's node, and a hand-over that does not
  // finish now is then completed by balancing here.
  if (groupId !== META_GROUP_ID) await recordPreferredLeader(api, ctx, groupId, to);
  if (to !== api.node.id) {
    if (groupId === META_GROUP_ID) api.node.host.report(groupId, { kind: 'transfer-leader', to });
    else api.node.scheduler.handOver(groupId, to);
  }
  const until = Math.min(ctx.deadlineMs, Date.now() + TRANSFER_WAIT_MS);
  while (Date.now() < until) {
    const st = g!.node.status();
    if (st.lead === to) return { leader: to, term: st.term };
    await sleep(50);
  }
  throw new DeadlineError(`waiting for ${to} to lead group ${groupId}`);
}

/** SetPreferredLeader through the meta group's leader, wherever that is. */
function recordPreferredLeader(
  api: ClusterContext,
  ctx: OpContext,
  groupId: number,
  node: string,
): Promise<unknown> {
  // Its own call: the meta leader may be another node even when this call was forwarded here.
  const own: OpContext = { deadlineMs: ctx.deadlineMs, forwarded: false, route: undefined };
  const req = { groupId, nodeId: node };
  return api.onGroup(own, META_GROUP_ID, 'NodeService', 'SetPreferredLeader', req, () =>
    setPreferredLeaderLocal(api, req),
  );
}

/** NodeService.SetPreferredLeader on the meta leader. */
export async function setPreferredLeaderLocal(api: ClusterContext, req: Msg): Promise<Msg> {
  await proposeMeta(api, {
    op: 'set-preferred-leader',
    groupId: num(req, 'groupId'),
    node: str(req, 'nodeId'),
  });
  return {};
}
