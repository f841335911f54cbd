/**
 * Bearer tokens as strings: `tkr_` and 43 characters of base64url (256 random bits). Only the
 * SHA-256 of a token is ever stored or replicated; a plain hash suffices because the secret is
 * random and long, so there is nothing to guess from the hash (the slow hashes made for
 * passwords protect low-entropy secrets, and would cost every call milliseconds).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const TOKEN_PREFIX = 'tkr_';
const TOKEN_BYTES = 32;
/** Characters of a token shown in listings, after its prefix: enough to tell tokens apart. */
const HINT_CHARS = 6;

/** Whether `token` has the shape newTokenSecret gives (any other cannot be a stored token). */
export function hasIssuedShape(token: string): boolean {
  return /^tkr_[A-Za-z0-9_-]{43}$/.test(token);
}

export function newTokenSecret(): string {
  return TOKEN_PREFIX + randomBytes(TOKEN_BYTES).toString('base64url');
}

/** A token's public id: random, unrelated to its secret. */
export function newTokenId(): string {
  return `tok_${randomBytes(8).toString('hex')}`;
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** What listings show of a token: its prefix and first characters, e.g. `tkr_Ab3dE9…`. */
export function tokenHint(token: string): string {
  return `${token.slice(0, TOKEN_PREFIX.length + HINT_CHARS)}…`;
}

/** Equal hashes, compared in constant time (both are hex SHA-256, so of equal length). */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The gRPC metadata key every call carries its credentials in. */
export const AUTHORIZATION_METADATA = 'authorization';

/** The `authorization` value for a bearer token. */
export function bearerHeader(token: string): string {
  return `Bearer ${token}`;
}

/**
 * The text of an `authorization` header's bearer token, or undefined when the header is not
 * `Bearer <token>` (scheme case-insensitive, one space or more).
 */
export function bearerOf(header: string): string | undefined {
  const m = /^bearer +([\x21-\x7e]+)$/i.exec(header.trim());
  return m?.[1];
}
