/**
 * Turns a call's `authorization` metadata into a Principal. The bootstrap admin token (every
 * node reads the same --admin-token-file) is checked against its hash here; every other token
 * against the meta group's replicated list.
 *
 * Revocation must reach every node within REVOCATION_BOUND_MS: a node accepts a stored token
 * only while its copy of the meta state was confirmed current (a ReadIndex on the meta group
 * completed) no longer than TOKEN_FRESH_MS ago. Under traffic the confirmation is renewed in
 * the background once it is half that old, so calls rarely wait for it; a node that cannot
 * confirm (cut off from the meta leader) answers UNAVAILABLE rather than trusting a list that
 * may still hold a revoked token. The bootstrap token needs no confirmation: it is not revocable
 * through the API, and it is what an operator uses to repair a cluster whose meta group is down.
 */
import type { Clock } from '../base/clock.js';
import { AuthUnavailableError, UnauthenticatedError } from './auth-errors.js';
import { BOOTSTRAP_PRINCIPAL, NO_AUTH_PRINCIPAL, type Principal } from './principal.js';
import { bearerOf, hashToken, sameHash } from './token-secret.js';
import type { TokenRecord } from './token-state.js';

/** A revoked token is refused by every node at most this long after the revocation commits. */
export const REVOCATION_BOUND_MS = 5000;
/** A stored token is accepted only on a meta state confirmed current at most this long ago. */
export const TOKEN_FRESH_MS = 3000;

export interface AuthenticatorOptions {
  /** Hex SHA-256 of the bootstrap admin token; undefined when the node runs --insecure-no-auth. */
  readonly adminTokenHash: string | undefined;
  /** The replicated tokens by hash (the meta state's derived index). */
  readonly tokensByHash: ReadonlyMap<string, TokenRecord>;
  /** Resolves once this node's meta replica has applied everything committed before the call. */
  readonly confirmMeta: () => Promise<unknown>;
  readonly clock: Clock;
}

export class Authenticator {
  /** Monotonic time the last successful confirmation was asked at; -Infinity before the first. */
  private confirmedAtMs = Number.NEGATIVE_INFINITY;
  private confirming: Promise<void> | undefined;

  constructor(private readonly o: AuthenticatorOptions) {}

  get enabled(): boolean {
    return this.o.adminTokenHash !== undefined;
  }

  /** The principal of a call given its `authorization` metadata values. */
  async authenticate(headers: readonly string[]): Promise<Principal> {
    if (this.o.adminTokenHash === undefined) return NO_AUTH_PRINCIPAL;
    if (headers.length === 0)
      throw new UnauthenticatedError(
        'AUTH_MISSING',
        'no credentials: send the metadata "authorization: Bearer <token>"',
      );
    const token = headers.length === 1 ? bearerOf(headers[0]!) : undefined;
    if (token === undefined)
      throw new UnauthenticatedError(
        'AUTH_MALFORMED',
        'the authorization metadata must be exactly one "Bearer <token>"',
      );
    const hash = hashToken(token);
    if (sameHash(hash, this.o.adminTokenHash)) return BOOTSTRAP_PRINCIPAL;
    let record = this.o.tokensByHash.get(hash);
    // A token created a moment ago through another node may not have reached this replica.
    if (
      record === undefined &&
      (await this.confirm().then(
        () => true,
        () => false,
      ))
    )
      record = this.o.tokensByHash.get(hash);
    if (record === undefined)
      throw new UnauthenticatedError('AUTH_UNKNOWN_TOKEN', 'unknown or revoked token');
    await this.fresh();
    // Revoked while this call waited for the confirmation.
    if (this.o.tokensByHash.get(hash) !== record)
      throw new UnauthenticatedError('AUTH_UNKNOWN_TOKEN', 'unknown or revoked token');
    return record.role === 'admin'
      ? { kind: 'admin', tokenId: record.id }
      : { kind: 'tenant', tenant: record.tenant, role: record.role, tokenId: record.id };
  }

  /** Resolves once the meta replica is confirmed current within TOKEN_FRESH_MS. */
  private async fresh(): Promise<void> {
    const age = this.o.clock.monotonicMs() - this.confirmedAtMs;
    if (age <= TOKEN_FRESH_MS / 2) return;
    if (age <= TOKEN_FRESH_MS) {
      // Still fresh: renew in the background so that calls do not wait at the boundary.
      this.confirm().catch(() => undefined);
      return;
    }
    try {
      await this.confirm();
      // The confirmation awaited may have been asked long ago (a ReadIndex that hung): only one
      // asked within the bound counts.
      if (this.o.clock.monotonicMs() - this.confirmedAtMs > TOKEN_FRESH_MS) await this.confirm();
      if (this.o.clock.monotonicMs() - this.confirmedAtMs > TOKEN_FRESH_MS)
        throw new Error('the meta group did not confirm in time');
    } catch (err) {
      throw new AuthUnavailableError(
        'AUTH_UNAVAILABLE',
        'this node cannot confirm its token list is current (the meta group is unreachable from it); try another node',
        { cause: err },
      );
    }
  }

  /** One ReadIndex on the meta group at a time, shared by every call that needs it. */
  private confirm(): Promise<void> {
    if (this.confirming) return this.confirming;
    const askedAt = this.o.clock.monotonicMs();
    const p = Promise.resolve()
      .then(() => this.o.confirmMeta())
      .then(() => {
        this.confirmedAtMs = Math.max(this.confirmedAtMs, askedAt);
      })
      .finally(() => {
        this.confirming = undefined;
      });
    this.confirming = p;
    return p;
  }
}
