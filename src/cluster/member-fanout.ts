/**
 * One internal call to every member of the cluster at once, each answer within `withinMs` (or
 * the caller's deadline, if sooner): this node answers itself without a call, and a member that
 * has no API address yet, refuses or does not answer in time is left out. What ClusterStatus and
 * GetTenant's usage are gathered with.
 */
import type { ClusterContext, OpContext } from './cluster-context.js';

export async function askEveryMember<T>(
  api: ClusterContext,
  ctx: OpContext,
  method: string,
  request: object,
  withinMs: number,
  local: () => T,
): Promise<T[]> {
  const bound: OpContext = {
    ...ctx,
    deadlineMs: Math.min(ctx.deadlineMs, Date.now() + withinMs),
  };
  const answers = await Promise.all(
    [...api.node.meta.members.values()].map((m): Promise<T | undefined> => {
      if (m.id === api.node.id) return Promise.resolve(local());
      if (m.apiAddress === '') return Promise.resolve(undefined);
      return api.callMember<T>(m.apiAddress, method, request, bound).catch(() => undefined);
    }),
  );
  return answers.filter((a) => a !== undefined);
}
