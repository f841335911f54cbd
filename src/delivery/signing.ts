/**
 * Standard Webhooks signatures (standardwebhooks.com): HMAC-SHA256 over
 * `${webhook-id}.${webhook-timestamp}.${body}` with the tenant's secret, base64, sent as
 * `v1,<signature>` in `webhook-signature`. During a secret rotation the request carries one
 * entry per secret, space-separated, so receivers that know either secret accept it.
 *
 * Secrets are `whsec_` + base64 of 24 to 64 random bytes (the spec's recommended range). They are
 * decoded once into SigningKeys; a tenant's keys are reused for every attempt.
 */
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { assert, assertionFailed } from '../base/assert.js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { INVALID_SECRET } from './errors.js';

export const SECRET_PREFIX = 'whsec_';
export const SECRET_BYTES_MIN = 24;
export const SECRET_BYTES_MAX = 64;
/** One current secret, plus the previous one while a rotation is under way. */
export const SIGNING_KEYS_MAX = 2;
/** Receivers reject timestamps further than this from their clock (the spec's default). */
export const DEFAULT_TOLERANCE_SEC = 5 * 60;

/** Decoded signing secrets, in the order given (current first, by convention). */
export interface SigningKeys {
  readonly keys: readonly KeyObject[];
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Why a secret cannot be used, or undefined when it can. */
function secretProblem(secret: string): string | undefined {
  if (!secret.startsWith(SECRET_PREFIX)) return `must start with ${SECRET_PREFIX}`;
  const body = secret.slice(SECRET_PREFIX.length);
  if (!BASE64.test(body)) return `must be ${SECRET_PREFIX} followed by standard base64`;
  const bytes = Buffer.from(body, 'base64').length;
  if (bytes < SECRET_BYTES_MIN || bytes > SECRET_BYTES_MAX) {
    return `must decode to ${SECRET_BYTES_MIN}–${SECRET_BYTES_MAX} bytes, got ${bytes}`;
  }
  return undefined;
}

/** Every rule the secrets break (for API validation before a tenant's secrets are stored). */
export function validateSigningSecrets(
  secrets: readonly string[],
  field = 'secrets',
): FieldViolation[] {
  const violations: FieldViolation[] = [];
  if (secrets.length < 1 || secrets.length > SIGNING_KEYS_MAX) {
    violations.push({ field, reason: `must hold 1 to ${SIGNING_KEYS_MAX} secrets` });
  }
  secrets.forEach((secret, i) => {
    const reason = secretProblem(secret);
    // The reason never quotes the secret: it ends up in logs.
    if (reason !== undefined) violations.push({ field: `${field}[${i}]`, reason });
  });
  return violations;
}

/** Decodes 1–2 `whsec_` secrets; a ValidationError (DELIVERY_INVALID_SECRET) lists every fault. */
export function compileSigningKeys(secrets: readonly string[]): SigningKeys {
  const violations = validateSigningSecrets(secrets);
  if (violations.length > 0) throw new ValidationError(INVALID_SECRET, violations);
  const keys = secrets.map((s) =>
    createSecretKey(Buffer.from(s.slice(SECRET_PREFIX.length), 'base64')),
  );
  return Object.freeze({ keys: Object.freeze(keys) });
}

/** What is signed: the message id, whole seconds since the epoch, and the exact body bytes. */
export interface SignedContent {
  readonly id: string;
  readonly timestampSec: number;
  readonly body: string | Uint8Array;
}

function hmac(key: KeyObject, id: string, timestamp: string, body: string | Uint8Array): Buffer {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
}

/**
 * The signature of a text body, base64: one update of the whole signed text and a base64
 * digest. Every attempt signs, and this form costs about two thirds of the two-update one with a
 * Buffer digest converted afterwards (5.7 against 8.5 µs on this machine).
 */
function hmacBase64(key: KeyObject, id: string, timestamp: string, body: string): string {
  return createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
}

function signOne(key: KeyObject, content: SignedContent, timestamp: string): string {
  return typeof content.body === 'string'
    ? hmacBase64(key, content.id, timestamp, content.body)
    : hmac(key, content.id, timestamp, content.body).toString('base64');
}

/** The `webhook-signature` value: `v1,<sig>` per key, space-separated. */
export function signWebhook(content: SignedContent, signing: SigningKeys): string {
  if (!(Number.isSafeInteger(content.timestampSec) && content.timestampSec >= 0))
    assertionFailed(`timestampSec must be whole seconds ≥ 0, got ${content.timestampSec}`);
  const timestamp = String(content.timestampSec);
  const [first, second] = signing.keys;
  assert(first !== undefined, 'signing keys are never empty');
  // One key is the common case; no array is built for it.
  const signature = `v1,${signOne(first, content, timestamp)}`;
  return second === undefined
    ? signature
    : `${signature} v1,${signOne(second, content, timestamp)}`;
}

export type VerifyResult =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly reason:
        | 'missing-header'
        | 'bad-timestamp'
        | 'timestamp-too-old'
        | 'timestamp-too-new'
        | 'no-matching-signature';
    };

export interface VerifyOptions {
  /** The receiver's wall clock, UTC ms. */
  readonly nowMs: number;
  /** @default DEFAULT_TOLERANCE_SEC */
  readonly toleranceSec?: number;
}

type HeaderValue = string | readonly string[] | undefined;

function headerText(value: HeaderValue): string | undefined {
  return typeof value === 'string' ? value : value?.[0];
}

/**
 * Receiver-side check, as a Standard Webhooks library does it: the timestamp is within the
 * tolerance, and some `v1` entry of `webhook-signature` matches some key (compared in constant
 * time). Other versions (`v1a`, `v2`) are skipped, not failed, so a sender may add schemes.
 * `headers` uses lower-case names, as node:http presents them.
 */
export function verifyWebhook(
  headers: Readonly<Record<string, HeaderValue>>,
  body: string | Uint8Array,
  signing: SigningKeys,
  options: VerifyOptions,
): VerifyResult {
  const id = headerText(headers['webhook-id']);
  const timestamp = headerText(headers['webhook-timestamp']);
  const signature = headerText(headers['webhook-signature']);
  if (id === undefined || timestamp === undefined || signature === undefined) {
    return { ok: false, reason: 'missing-header' };
  }
  if (!/^\d{1,15}$/.test(timestamp)) return { ok: false, reason: 'bad-timestamp' };
  const timestampSec = Number(timestamp);
  const nowSec = Math.floor(options.nowMs / 1000);
  const tolerance = options.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  if (timestampSec < nowSec - tolerance) return { ok: false, reason: 'timestamp-too-old' };
  if (timestampSec > nowSec + tolerance) return { ok: false, reason: 'timestamp-too-new' };
  // The timestamp is signed as the text received, so leading zeros cannot slip past.
  const expected = signing.keys.map((key) => hmac(key, id, timestamp, body));
  for (const entry of signature.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(entry.slice(comma + 1), 'base64');
    for (const want of expected) {
      if (given.length === want.length && timingSafeEqual(given, want)) return { ok: true };
    }
  }
  return { ok: false, reason: 'no-matching-signature' };
}
