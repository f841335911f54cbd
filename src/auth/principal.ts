/**
 * Who a call comes from, once its bearer token has been checked: the cluster admin, or one
 * tenant in one role. What each role may call is method-policy.ts; what a tenant principal may
 * touch inside a call (its own tenant only) is src/api/tenant-scope.ts.
 */

/** A tenant token's role: `writer` includes `reader`; `worker` only leases runs. */
export const TENANT_ROLES = ['reader', 'writer', 'worker'] as const;
export type TenantRole = (typeof TENANT_ROLES)[number];

/** Roles a stored token may carry: a tenant role, or `admin` (a token with no tenant). */
export const TOKEN_ROLES = ['admin', ...TENANT_ROLES] as const;
export type TokenRole = (typeof TOKEN_ROLES)[number];

export type Principal =
  | {
      readonly kind: 'admin';
      /** Which credential: a stored token's id, `bootstrap` (the admin token file) or `no-auth`. */
      readonly tokenId: string;
    }
  | {
      readonly kind: 'tenant';
      readonly tenant: string;
      readonly role: TenantRole;
      readonly tokenId: string;
    };

/** Every call on a node started with --insecure-no-auth runs as this. */
export const NO_AUTH_PRINCIPAL: Principal = { kind: 'admin', tokenId: 'no-auth' };

/** The bootstrap admin token (--admin-token-file). */
export const BOOTSTRAP_PRINCIPAL: Principal = { kind: 'admin', tokenId: 'bootstrap' };

export function isTokenRole(role: string): role is TokenRole {
  return (TOKEN_ROLES as readonly string[]).includes(role);
}

/** How a principal is named in audit records and errors: `admin (bootstrap)`, `acme/writer (tok_…)`. */
export function describePrincipal(p: Principal): string {
  return p.kind === 'admin' ? `admin (${p.tokenId})` : `${p.tenant}/${p.role} (${p.tokenId})`;
}
