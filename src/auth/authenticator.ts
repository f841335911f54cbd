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
import { bearerOf, hashToken, hasIssuedShape, sameHash } from './token-secret.js';
import type { TokenRecord } from './token-state.js';

/** A revoked token is refused by every node at most this long after the revocation commits. */
export const REVOCATION_BOUND_MS = 5000;
/** A stored token is accepted only on a meta state confirmed current at most this long ago. */
export const TOKEN_FRESH_MS = 3000;
/** A confirmation that takes longer fails (the calls waiting on it get UNAVAILABLE). */
export const CONFIRM_TIMEOUT_MS = 2000;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no confirmation within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** A stream's admitted principal, later: still good, its token revoked, or not confirmable. */
export type TokenStanding = 'valid' | 'revoked' | 'unconfirmed';

export interface AuthenticatorOptions {
  /** Hex SHA-256 of the bootstrap admin token; undefined when the node runs --insecure-no-auth. */
  readonly adminTokenHash: string | undefined;
  /** The replicated tokens by hash (the meta state's derived index). */
  readonly tokensByHash: ReadonlyMap<string, TokenRecord>;
  /** The same tokens by id (for principals admitted earlier: is their token still there?). */
  readonly tokensById: ReadonlyMap<string, TokenRecord>;
  /** Resolves once this node's meta replica has applied everything committed before the call. */
  readonly confirmMeta: () => Promise<unknown>;
  readonly clock: Clock;
}

export class Authenticator {
  /** Monotonic time the last successful confirmation was asked at; -Infinity before the first. */
  private confirmedAtMs = Number.NEGATIVE_INFINITY;
  private confirming: Promise<void> | undefined;

  constructor(private readonly o: AuthenticatorOptions) {}

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
    if (record === undefined) {
      // Only a token of the issued shape can be one created a moment ago through another node,
      // not yet on this replica: anything else is refused without asking the meta group.
      if (!hasIssuedShape(token))
        throw new UnauthenticatedError('AUTH_UNKNOWN_TOKEN', 'unknown or revoked token');
      await this.fresh(true);
      record = this.o.tokensByHash.get(hash);
    }
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

  /**
   * Whether a principal admitted earlier (on a stream that stays open) may go on: its stored
   * token still exists on a meta state confirmed within TOKEN_FRESH_MS. Renews the confirmation
   * in the background as calls do; the bootstrap token and --insecure-no-auth never lapse.
   */
  stillValid(p: Principal): TokenStanding {
    if (p.tokenId === BOOTSTRAP_PRINCIPAL.tokenId || p.tokenId === NO_AUTH_PRINCIPAL.tokenId)
      return 'valid';
    if (!this.o.tokensById.has(p.tokenId)) return 'revoked';
    const age = this.o.clock.monotonicMs() - this.confirmedAtMs;
    if (age > TOKEN_FRESH_MS / 2) this.confirm().catch(() => undefined);
    return age <= TOKEN_FRESH_MS ? 'valid' : 'unconfirmed';
  }

  /**
   * Resolves once the meta replica is confirmed current within TOKEN_FRESH_MS; `now`: a
   * confirmation asked from now on (a token this replica does not hold may be a new one).
   */
  private async fresh(now = false): Promise<void> {
    const age = this.o.clock.monotonicMs() - this.confirmedAtMs;
    if (!now && age <= TOKEN_FRESH_MS / 2) return;
    if (!now && age <= TOKEN_FRESH_MS) {
      // Still fresh: renew in the background so that calls do not wait at the boundary.
      this.confirm().catch(() => undefined);
      return;
    }
    const askedAt = this.o.clock.monotonicMs();
    try {
      await this.confirm();
      // The confirmation awaited may have been asked before this call (one in flight already):
      // a new token needs one asked after it, and any call one asked within the bound.
      if (now && this.confirmedAtMs < askedAt) await this.confirm();
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
      .then(() => withTimeout(this.o.confirmMeta(), CONFIRM_TIMEOUT_MS))
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
