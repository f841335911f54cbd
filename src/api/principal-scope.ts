/**
 * The tenant a call may act on, given its principal: an admin acts on whichever tenant the
 * request names; a tenant's token on its own tenant only (taken as the request's tenant when the
 * request names none). Naming another tenant is PERMISSION_DENIED whether or not that tenant
 * exists, so the answer reveals nothing about other tenants.
 */
import { PermissionDeniedError } from '../auth/auth-errors.js';
import type { CallContext } from './router.js';

export function scopeTenant(ctx: CallContext, requested: string, field: string): string {
  const p = ctx.principal;
  if (p === undefined || p.kind === 'admin') return requested;
  if (requested === '' || requested === p.tenant) return p.tenant;
  throw new PermissionDeniedError(
    'PERMISSION_DENIED',
    `${field}: the caller's token acts for tenant ${p.tenant} only`,
  );
}
