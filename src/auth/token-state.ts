/**
 * The API tokens as the meta group replicates them: create and revoke commands and their
 * deterministic apply. A record holds the token's hash, never the token. Pure: the proposer
 * made the secret, its hash and the id; apply only checks them against the state.
 */
import type { TokenRole } from './principal.js';

export interface TokenRecord {
  /** Public id (`tok_…`): what listings show and revocations name. */
  readonly id: string;
  /** Hex SHA-256 of the token (token-secret.ts). */
  readonly hash: string;
  /** What listings show of the token (its first characters). */
  readonly hint: string;
  /** The tenant it acts for; '' for an admin token. */
  readonly tenant: string;
  readonly role: TokenRole;
  /** Free text from the creator: what the token is for. */
  readonly description: string;
  readonly createdAtMs: number;
  /** Who created it, as describePrincipal names them. */
  readonly createdBy: string;
}

export type TokenCommand =
  | { readonly op: 'create-token'; readonly token: TokenRecord }
  | { readonly op: 'revoke-token'; readonly id: string };

export type TokenResult = { ok: true } | { ok: false; code: string; reason: string };

/** The parts of the meta state token commands read and write. */
export interface TokenState {
  readonly tokens: Map<string, TokenRecord>;
  /** Derived: tokens by hash, for the check on every call. */
  readonly tokensByHash: Map<string, TokenRecord>;
  readonly tenants: ReadonlyMap<string, unknown>;
}

export function isTokenCommand(c: { readonly op: string }): c is TokenCommand {
  return c.op === 'create-token' || c.op === 'revoke-token';
}

export function applyTokenCommand(s: TokenState, c: TokenCommand): TokenResult {
  if (c.op === 'revoke-token') {
    const t = s.tokens.get(c.id);
    if (!t) return { ok: false, code: 'TOKEN_NOT_FOUND', reason: `token ${c.id} not found` };
    s.tokens.delete(c.id);
    s.tokensByHash.delete(t.hash);
    return { ok: true };
  }
  const t = c.token;
  // A retried create (its outcome unknown to the proposer) finds its own record: the same id
  // and hash is the same token, and succeeds again rather than failing the retry.
  const had = s.tokens.get(t.id);
  if (had) {
    return had.hash === t.hash
      ? { ok: true }
      : { ok: false, code: 'TOKEN_ALREADY_EXISTS', reason: `token id ${t.id} is taken` };
  }
  if (s.tokensByHash.has(t.hash))
    return { ok: false, code: 'TOKEN_ALREADY_EXISTS', reason: 'that token is already issued' };
  if (t.role !== 'admin' && !s.tenants.has(t.tenant))
    return { ok: false, code: 'TENANT_NOT_FOUND', reason: `tenant ${t.tenant} does not exist` };
  s.tokens.set(t.id, t);
  s.tokensByHash.set(t.hash, t);
  return { ok: true };
}

/** Rebuilds the state's token maps from a snapshot's list. */
export function restoreTokens(s: TokenState, list: readonly TokenRecord[]): void {
  s.tokens.clear();
  s.tokensByHash.clear();
  for (const t of list) {
    s.tokens.set(t.id, t);
    s.tokensByHash.set(t.hash, t);
  }
}
