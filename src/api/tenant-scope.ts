/**
 * The tenant a call acts as. Job ids are unique per tenant (src/scheduler/job-key.ts), so every
 * call that names a job, a run or a tenant's jobs decides its tenant here, and only here, with
 * the caller's principal: an admin acts on whichever tenant the request names (and must name
 * one); a tenant token on its own tenant only, which is also what a request naming none means.
 * Naming another tenant is PERMISSION_DENIED whether or not that tenant exists, so the answer
 * tells a tenant nothing about others.
 */
import { PermissionDeniedError } from '../auth/auth-errors.js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { jobKeyOf } from '../scheduler/job-key.js';
import { JOB_ID_PATTERN, TENANT_ID_PATTERN } from './job-spec.js';
import type { CallContext } from './router.js';

export const TENANT_REQUIRED_REASON = 'is required: job ids are unique per tenant';
export const TENANT_ID_REASON =
  'must be 1-63 lowercase letters, digits, _ or -, starting with a letter or digit';
export const JOB_ID_REASON = 'must be 1-128 of A-Z a-z 0-9 _ . -, starting with a letter or digit';

/**
 * The tenant the call acts as, from what the request names in `field` (its snake_case or
 * camelCase path, as violations name fields).
 * @throws ValidationError REQUEST_INVALID naming `field` when it is empty or not a tenant id
 * @throws PermissionDeniedError when a tenant token names another tenant
 */
export function resolveTenant(ctx: CallContext, requested: string, field: string): string {
  requested = scopeTenant(ctx, requested, field);
  if (requested === '')
    throw new ValidationError('REQUEST_INVALID', [{ field, reason: TENANT_REQUIRED_REASON }]);
  if (!TENANT_ID_PATTERN.test(requested))
    throw new ValidationError('REQUEST_INVALID', [{ field, reason: TENANT_ID_REASON }]);
  return requested;
}

/**
 * The key of the job a request names by `jobIdField` under the tenant in `tenantField`: both
 * checked together, so one answer names every bad field.
 * @throws ValidationError REQUEST_INVALID
 */
export function resolveJobKey(
  ctx: CallContext,
  requestedTenant: string,
  jobId: string,
  fields: { readonly tenant: string; readonly jobId: string } = {
    tenant: 'tenant',
    jobId: 'jobId',
  },
): { readonly tenant: string; readonly jobId: string; readonly key: string } {
  const v: FieldViolation[] = [];
  if (!JOB_ID_PATTERN.test(jobId)) v.push({ field: fields.jobId, reason: JOB_ID_REASON });
  let tenant = '';
  try {
    tenant = resolveTenant(ctx, requestedTenant, fields.tenant);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    v.push(...err.violations);
  }
  if (v.length > 0) throw new ValidationError('REQUEST_INVALID', v);
  return { tenant, jobId, key: jobKeyOf(tenant, jobId) };
}

/**
 * The tenant a principal may act on given what the request names: what it names, for an admin
 * (or the node itself); the token's own tenant, for a tenant token naming it or none.
 * @throws PermissionDeniedError when a tenant token names another tenant
 */
export function scopeTenant(ctx: CallContext, requested: string, field: string): string {
  const p = ctx.principal;
  if (p === undefined || p.kind === 'admin') return requested;
  if (requested === '' || requested === p.tenant) return p.tenant;
  throw new PermissionDeniedError(
    'PERMISSION_DENIED',
    `${field}: the caller's token acts for tenant ${p.tenant} only`,
  );
}
