/**
 * A job's `depends_on` checked against the tenant's other jobs before a create or update is
 * routed (docs/workflows.md): every upstream must exist, the job may not name itself, and no
 * path of upstreams may lead back to the job (a cycle, named in the refusal). The walk follows
 * upstreams only (GetJob on each one's group leader), so its cost is the size of the job's
 * upstream closure, not the tenant's job count.
 *
 * Two updates racing in two groups can still close a cycle the walk could not see; a run whose
 * upstreams never settle gives up after its retry max age (GroupDispatcher.askUpstreams), so
 * such a cycle ends in SKIPPED runs, not in runs that wait forever.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { jobKeyOf } from '../scheduler/job-key.js';
import type { ApiContext } from './api-context.js';
import { jobOut, type Msg } from './convert.js';
import type { CallContext } from './router.js';
import { JOB_ID_PATTERN } from './job-spec.js';
import { isServiceError } from './status-map.js';
import { ApiCallError } from './client.js';
import { status as grpcStatus } from '@grpc/grpc-js';
import { TickraftError } from '../base/errors.js';

/** Most jobs the walk visits: a DAG larger than this is refused (split it into several). */
export const DEPENDENCY_CLOSURE_MAX = 1000;

/**
 * Refuses (INVALID_ARGUMENT, naming `<prefix>dependsOn[i]`) a `dependsOn` list of job ids that
 * names the job itself, a job the tenant does not have, or closes a cycle through `jobId`.
 */
export async function checkDependencies(
  api: ApiContext,
  ctx: CallContext,
  tenant: string,
  jobId: string,
  dependsOn: readonly string[],
  prefix: string,
): Promise<void> {
  const violations: FieldViolation[] = [];
  const field = (i: number): string => `${prefix}dependsOn[${i}]`;
  const upstreamsOf = new Map<string, readonly string[]>();
  const load = async (id: string): Promise<readonly string[] | undefined> => {
    const known = upstreamsOf.get(id);
    if (known !== undefined) return known;
    const job = await getJob(api, ctx, tenant, id);
    if (job === undefined) return undefined;
    const ids = ((job['spec'] as Msg | undefined)?.['dependsOn'] as string[] | undefined) ?? [];
    upstreamsOf.set(id, ids);
    return ids;
  };
  for (const [i, id] of dependsOn.entries()) {
    // An id that is not one is refused by the definition's own check (compileJobSpec).
    if (!JOB_ID_PATTERN.test(id)) continue;
    if (id === jobId) {
      violations.push({ field: field(i), reason: 'a job cannot depend on itself' });
      continue;
    }
    if ((await load(id)) === undefined)
      violations.push({
        field: field(i),
        reason: `tenant ${tenant} has no job ${JSON.stringify(id)}`,
      });
  }
  if (violations.length > 0) throw new ValidationError('JOB_SPEC_INVALID', violations);
  // Depth first from each upstream; a path that comes back to jobId is the cycle.
  for (const [i, first] of dependsOn.entries()) {
    if (!JOB_ID_PATTERN.test(first)) continue;
    const cycle = await pathTo(first, jobId, load);
    if (cycle !== undefined)
      throw new ValidationError('JOB_SPEC_INVALID', [
        {
          field: field(i),
          reason: `makes a cycle: ${[jobId, ...cycle].map((j) => JSON.stringify(j)).join(' → ')}`,
        },
      ]);
  }
  if (upstreamsOf.size > DEPENDENCY_CLOSURE_MAX)
    throw new ValidationError('JOB_SPEC_INVALID', [
      {
        field: `${prefix}dependsOn`,
        reason: `the jobs it reaches through depends_on are more than ${DEPENDENCY_CLOSURE_MAX}`,
      },
    ]);
}

/** A path of upstream edges from `from` to `to` (both included), or undefined. */
async function pathTo(
  from: string,
  to: string,
  load: (id: string) => Promise<readonly string[] | undefined>,
): Promise<string[] | undefined> {
  const seen = new Set<string>();
  const walk = async (id: string, path: string[]): Promise<string[] | undefined> => {
    if (id === to) return [...path, id];
    if (seen.has(id) || seen.size > DEPENDENCY_CLOSURE_MAX) return undefined;
    seen.add(id);
    for (const next of (await load(id)) ?? []) {
      const found = await walk(next, [...path, id]);
      if (found !== undefined) return found;
    }
    return undefined;
  };
  return walk(from, []);
}

/** The job as GetJob answers it (on its group's leader), or undefined when it does not exist. */
async function getJob(
  api: ApiContext,
  ctx: CallContext,
  tenant: string,
  jobId: string,
): Promise<Msg | undefined> {
  const key = jobKeyOf(tenant, jobId);
  try {
    return await api.onGroup<Msg>(
      ctx,
      () => api.admin.groupOf(key),
      'JobService',
      'GetJob',
      { tenant, jobId },
      async () => {
        const { job } = await api.admin.getJob(key);
        return jobOut(job, api.admin.groupOf(job.id));
      },
    );
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

function isNotFound(err: unknown): boolean {
  if (err instanceof TickraftError) return err.code === 'JOB_NOT_FOUND';
  if (err instanceof ApiCallError) return err.status === grpcStatus.NOT_FOUND;
  return isServiceError(err) && err.code === grpcStatus.NOT_FOUND;
}
