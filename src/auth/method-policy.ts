/**
 * What each RPC requires of its caller. A method missing here is refused to everyone but the
 * admin (test/unit/auth/method-policy.test.ts checks every method of every service is listed,
 * so a new RPC cannot slip through unreviewed). Which tenant a tenant principal may touch inside
 * a call is checked by the handler (src/api/tenant-scope.ts).
 */
import { PermissionDeniedError } from './auth-errors.js';
import { describePrincipal, type Principal } from './principal.js';

/**
 * - `reader`: a tenant's reader or writer token (reads of its own tenant);
 * - `writer`: a tenant's writer token;
 * - `worker`: a tenant's worker token (the Work stream, its own tenant's runs);
 * - `completer`: a tenant's worker or writer token (a webhook receiver finishing a run it
 *   accepted: it completes runs as a worker does, and may be a service holding a writer token);
 * - `member`: any valid token (cluster topology that workers need to find the nodes);
 * - `admin`: admin tokens only (an operator's call: audited);
 * - `node`: admin tokens only, for the node-to-node methods nodes call on each other with the
 *   bootstrap token (not an operator's call: audited only when refused).
 * An admin token passes every requirement.
 */
export type Requirement =
  'reader' | 'writer' | 'worker' | 'completer' | 'member' | 'admin' | 'node';

export const METHOD_POLICY: Readonly<Record<string, Requirement>> = {
  'JobService.CreateJob': 'writer',
  'JobService.CreateJobs': 'writer',
  'JobService.GetJob': 'reader',
  'JobService.UpdateJob': 'writer',
  'JobService.DeleteJob': 'writer',
  'JobService.ListJobs': 'reader',
  'JobService.PauseJob': 'writer',
  'JobService.ResumeJob': 'writer',
  'JobService.TriggerJob': 'writer',
  'JobService.BackfillJob': 'writer',
  'JobService.PreviewSchedule': 'reader',
  'RunService.ListRuns': 'reader',
  'RunService.GetRun': 'reader',
  'RunService.ListDeadRuns': 'reader',
  'RunService.ReplayRun': 'writer',
  'RunService.PurgeDeadRuns': 'writer',
  'RunService.CompleteRun': 'completer',
  'RunService.Heartbeat': 'completer',
  'RunService.WatchRuns': 'reader',
  'RunService.GetRunOutput': 'reader',
  'TenantService.CreateTenant': 'admin',
  'TenantService.GetTenant': 'reader',
  'TenantService.UpdateTenant': 'admin',
  'TenantService.RotateSecret': 'admin',
  'TenantService.ListTenants': 'admin',
  'TokenService.CreateToken': 'admin',
  'TokenService.ListTokens': 'admin',
  'TokenService.RevokeToken': 'admin',
  'AdminService.ClusterStatus': 'member',
  'AdminService.TransferLeader': 'admin',
  'AdminService.AddNode': 'admin',
  'AdminService.MoveReplica': 'admin',
  'AdminService.Rebalance': 'admin',
  'AdminService.BulkPause': 'admin',
  'AdminService.BulkResume': 'admin',
  'AdminService.BulkCancel': 'admin',
  'AdminService.DrainNode': 'admin',
  'AdminService.SplitGroup': 'admin',
  'AdminService.UndrainNode': 'admin',
  'AdminService.RemoveNode': 'admin',
  'WorkerService.Work': 'worker',
  // Node to node (proto/tickraft_internal.proto): nodes call each other with the admin token.
  'NodeService.GroupListJobs': 'node',
  'NodeService.GroupListDeadRuns': 'node',
  'NodeService.LocalStatus': 'node',
  'NodeService.RegisterApiAddress': 'node',
  'NodeService.SetPreferredLeader': 'node',
  'NodeService.GroupMembership': 'node',
  'NodeService.ChangeGroupMembership': 'node',
  'NodeService.GroupTenantJobs': 'node',
  'NodeService.SplitGroup': 'node',
  'NodeService.GroupCreateJobs': 'node',
  'NodeService.NodeCreateJobs': 'node',
  'NodeService.NodeTenantUsage': 'node',
  'NodeService.UpstreamRun': 'node',
  'NodeService.RunOutput': 'node',
};

export function requirementOf(method: string): Requirement {
  return METHOD_POLICY[method] ?? 'admin';
}

/** Throws PERMISSION_DENIED unless `p` meets `need`. */
export function authorize(p: Principal, need: Requirement, method: string): void {
  if (p.kind === 'admin') return;
  const ok =
    need === 'member' ||
    (need === 'reader' && (p.role === 'reader' || p.role === 'writer')) ||
    (need === 'writer' && p.role === 'writer') ||
    (need === 'worker' && p.role === 'worker') ||
    (need === 'completer' && (p.role === 'worker' || p.role === 'writer'));
  if (!ok)
    throw new PermissionDeniedError(
      'PERMISSION_DENIED',
      `${method} needs ${need === 'admin' || need === 'node' ? 'an admin token' : need === 'completer' ? 'a worker or writer token' : `a ${need} token`}; the caller is ${describePrincipal(p)}`,
    );
}
