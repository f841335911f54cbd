/**
 * What an attempt's ending means: success, retry later, or fail now (docs/API.md, What a webhook
 * receiver gets). Pure: the caller describes what it observed (a status and its Retry-After header,
 * a timeout, a network error code) and passes the wall clock in for the HTTP-date form of
 * Retry-After. This is the only place that decides retry against fail, so the webhook executor,
 * metrics and the DLQ agree.
 *
 * Rules:
 * - 2xx succeeds.
 * - 408, 429 and 5xx retry, honouring Retry-After (delta-seconds or HTTP-date) up to a cap.
 * - Every other status fails at once: other 4xx say the request itself is wrong; 3xx fails
 *   because redirects are not followed (a signed payload must not be forwarded to a URL the job
 *   does not name); a status outside 200–599 is not an answer this contract knows.
 * - Timeouts, connection errors and malformed answers retry.
 * - A caller abort (shutdown, lost leadership) retries: the target did nothing wrong.
 * - A request that cannot be built (bad URL, reserved header, payload not JSON) fails at once.
 * - A target the node's policy forbids (target-policy.ts: loopback, private, link-local… or a
 *   name that resolved to one) fails at once, as TARGET_FORBIDDEN: nothing was sent, and every
 *   retry would be refused the same way.
 */
import { assertNever } from '../base/assert.js';
import { civilFromDays, DAY_MS, daysFromCivil, daysInMonth } from '../schedule/civil.js';
import type { AttemptOutcome } from '../scheduler/model.js';
import type { DeliveryErrorCode } from './errors.js';

/**
 * Where a timeout struck: undici's connect / headers / body timers, the attempt deadline, or the
 * attempt deadline while the request still waited in the pool for a connection (`queued`).
 */
export type TimeoutPhase = 'connect' | 'headers' | 'body' | 'deadline' | 'queued';

/** What was observed of one attempt, reduced to what classification needs. */
export type AttemptObservation =
  | {
      readonly kind: 'response';
      readonly statusCode: number;
      /** The Retry-After header as received, if any. */
      readonly retryAfter: string | undefined;
    }
  | { readonly kind: 'timeout'; readonly phase: TimeoutPhase }
  /** A socket or resolver error; `errorCode` is Node's or undici's `err.code`. */
  | { readonly kind: 'network'; readonly errorCode: string | undefined; readonly message: string }
  /** The caller's signal ended the attempt, before anything was handed to undici or after. */
  | { readonly kind: 'aborted'; readonly isBeforeDispatch: boolean }
  /** The request could not be built or was rejected by undici before it was dispatched. */
  | { readonly kind: 'invalid-request'; readonly reason: string }
  /**
   * The connect step refused the target's address (guarded-connect.ts): no socket was opened.
   */
  | { readonly kind: 'forbidden'; readonly reason: string }
  /** OriginPools refused locally; the request never reached a connection. */
  | {
      readonly kind: 'not-dispatched';
      readonly code: 'DELIVERY_POOLS_CLOSED' | 'DELIVERY_ORIGINS_EXHAUSTED';
      readonly reason: string;
    };

export interface Classification {
  readonly outcome: AttemptOutcome;
  /** Absent on success. */
  readonly code?: DeliveryErrorCode;
  /** Short, stable text for the attempt record and logs. */
  readonly reason: string;
  /** Only on a retry whose answer carried a usable Retry-After. */
  readonly retryAfterMs?: number;
}

export interface ClassifyOptions {
  /** Wall clock, UTC ms: the HTTP-date form of Retry-After is relative to it. */
  readonly nowMs: number;
  /**
   * Retry-After values above this are cut to it: a typo or a hostile server must not park a run
   * for years. planRetry still gives up when the wait would pass the job's max age.
   * @default RETRY_AFTER_MAX_MS (24 h)
   */
  readonly retryAfterMaxMs?: number;
}

export const RETRY_AFTER_MAX_MS = 24 * 3_600_000;

export function classify(
  observation: AttemptObservation,
  options: ClassifyOptions,
): Classification {
  switch (observation.kind) {
    case 'response':
      return classifyStatus(observation.statusCode, observation.retryAfter, options);
    case 'timeout':
      return {
        outcome: 'retry',
        code: 'DELIVERY_TIMEOUT',
        reason: timeoutReason(observation.phase),
      };
    case 'network':
      return classifyNetwork(observation.errorCode, observation.message);
    case 'aborted':
      return {
        outcome: 'retry',
        code: 'DELIVERY_ABORTED',
        reason: observation.isBeforeDispatch ? 'aborted before dispatch' : 'aborted in flight',
      };
    case 'invalid-request':
      return { outcome: 'fail', code: 'DELIVERY_INVALID_REQUEST', reason: observation.reason };
    case 'forbidden':
      // The code leads the reason: the attempt record keeps the reason only.
      return {
        outcome: 'fail',
        code: 'TARGET_FORBIDDEN',
        reason: `TARGET_FORBIDDEN: ${observation.reason}`,
      };
    case 'not-dispatched':
      return { outcome: 'retry', code: observation.code, reason: observation.reason };
    default:
      return assertNever(observation, 'attempt observation');
  }
}

export function classifyStatus(
  statusCode: number,
  retryAfter: string | undefined,
  options: ClassifyOptions,
): Classification {
  const reason = `http ${statusCode}`;
  if (statusCode >= 200 && statusCode <= 299) return { outcome: 'success', reason };
  if (isRetryableStatus(statusCode)) {
    const retryAfterMs =
      retryAfter === undefined
        ? undefined
        : parseRetryAfterMs(retryAfter, options.nowMs, options.retryAfterMaxMs);
    return retryAfterMs === undefined
      ? { outcome: 'retry', code: 'DELIVERY_HTTP_STATUS', reason }
      : { outcome: 'retry', code: 'DELIVERY_HTTP_STATUS', reason, retryAfterMs };
  }
  if (statusCode >= 300 && statusCode <= 399) {
    return { outcome: 'fail', code: 'DELIVERY_HTTP_STATUS', reason: `${reason} (not followed)` };
  }
  return { outcome: 'fail', code: 'DELIVERY_HTTP_STATUS', reason };
}

export function isRetryableStatus(statusCode: number): boolean {
  return statusCode === 408 || statusCode === 429 || (statusCode >= 500 && statusCode <= 599);
}

function timeoutReason(phase: TimeoutPhase): string {
  switch (phase) {
    case 'connect':
      return 'connect timeout';
    case 'headers':
      return 'no response headers in time';
    case 'body':
      return 'response body stalled';
    case 'deadline':
      return 'attempt deadline passed';
    case 'queued':
      return 'attempt deadline passed before a connection was free';
    default:
      return assertNever(phase, 'timeout phase');
  }
}

/** Resolver failures: the name did not become an address, so no connection was opened. */
const DNS_ERROR_CODES: ReadonlySet<string> = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NODATA',
  'EAI_NONAME',
]);

function classifyNetwork(errorCode: string | undefined, message: string): Classification {
  const code = errorCode ?? 'unknown';
  if (code === 'ECONNREFUSED') {
    return { outcome: 'retry', code: 'DELIVERY_CONNECTION_REFUSED', reason: 'connection refused' };
  }
  if (DNS_ERROR_CODES.has(code)) {
    return { outcome: 'retry', code: 'DELIVERY_DNS_FAILED', reason: `dns: ${code}` };
  }
  if (code.startsWith('HPE_')) {
    return { outcome: 'retry', code: 'DELIVERY_PROTOCOL_ERROR', reason: `bad response: ${code}` };
  }
  // Everything else (resets, closed sockets, unreachable hosts, TLS failures, unknown errors)
  // is treated as transient: the retry policy bounds how long that lasts, and a wrong guess
  // costs a few attempts where a wrong "fail" would lose the run.
  const text = message.length > 0 ? `${code}: ${message}` : code;
  return { outcome: 'retry', code: 'DELIVERY_CONNECTION_FAILED', reason: truncate(text, 200) };
}

/**
 * Whether the request provably never reached the target, so that an at-most-once job may try
 * again without risking a second delivery. Deliberately narrow:
 * - connection refused: ECONNREFUSED comes only from the connect() of a new socket, and undici
 *   (pipelining 1) writes a request only after its socket connected; a request that was
 *   written and then lost its socket fails with a reset or "other side closed" instead;
 * - a DNS failure: no address, so no socket;
 * - a target refused by the connect step's policy: it fails before any socket is opened;
 * - a request that was never dispatched: built wrong, refused by OriginPools, or ended by the
 *   deadline or the caller while it still waited in the pool for a connection. undici calls a
 *   handler's onRequestStart right before it writes the request, and webhook.ts aborts it there,
 *   so a request whose onRequestStart had not run when the attempt ended is never written.
 * Everything else counts as possibly delivered, including connect timeouts (a late accept
 * races the timer), TLS failures, resets, timeouts of any phase and aborts in flight (the bytes
 * may be in the peer's buffer), and any answer at all, even a 5xx (the target ran code).
 */
export function isProvablyUndelivered(observation: AttemptObservation): boolean {
  switch (observation.kind) {
    case 'network': {
      const code = observation.errorCode;
      return code !== undefined && (code === 'ECONNREFUSED' || DNS_ERROR_CODES.has(code));
    }
    case 'invalid-request':
    case 'not-dispatched':
    case 'forbidden':
      return true;
    case 'aborted':
      return observation.isBeforeDispatch;
    case 'timeout':
      return observation.phase === 'queued';
    case 'response':
      return false;
    default:
      return assertNever(observation, 'attempt observation');
  }
}

/**
 * Maps an error thrown by undici or Node's socket layer to an observation. Deadline and caller
 * aborts are recognised by the caller (it knows which of its signals fired) and never reach here.
 */
export function observeError(err: unknown): AttemptObservation {
  const code = errorCodeOf(err);
  const message = err instanceof Error ? err.message : String(err);
  switch (code) {
    case 'TARGET_FORBIDDEN':
      return { kind: 'forbidden', reason: truncate(message, 400) };
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { kind: 'timeout', phase: 'connect' };
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { kind: 'timeout', phase: 'headers' };
    case 'UND_ERR_BODY_TIMEOUT':
      return { kind: 'timeout', phase: 'body' };
    case 'UND_ERR_INVALID_ARG':
    case 'UND_ERR_NOT_SUPPORTED':
    case 'ERR_INVALID_URL':
    case 'ERR_INVALID_HTTP_TOKEN':
    case 'ERR_INVALID_CHAR':
      return { kind: 'invalid-request', reason: truncate(message, 200) };
    default:
      return { kind: 'network', errorCode: code, message };
  }
}

/**
 * `err.code`, looking inside an AggregateError: Node's happy-eyeballs connect (autoSelectFamily)
 * reports one error per address tried. Only a code shared by every inner error is returned, so
 * "refused on one address, reset on another" does not pass as a clean refusal.
 */
function errorCodeOf(err: unknown): string | undefined {
  const own = codeProperty(err);
  if (err instanceof AggregateError && err.errors.length > 0) {
    const inner = err.errors.map(codeProperty);
    const first = inner[0];
    return first !== undefined && inner.every((c) => c === first) ? first : (own ?? 'EMIXED');
  }
  return own;
}

function codeProperty(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = err.code;
  return typeof code === 'string' ? code : undefined;
}

function truncate(text: string, maxChars: number): string {
  return text.length <= maxChars ? text : `${text.slice(0, maxChars - 1)}…`;
}

// ---------------------------------------------------------------------------------------------
// Retry-After (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date (§5.6.7) in any of its three
// forms. Parsed by hand rather than with Date.parse, whose handling of the obsolete forms is
// implementation-defined, and so the module stays free of the Date global.

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY_NAMES = 'Mon|Tue|Wed|Thu|Fri|Sat|Sun';
const LONG_DAY_NAMES = 'Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday';
const MONTH_NAMES = MONTHS.join('|');
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
/** `Sun, 06 Nov 1994 08:49:37 GMT`, the form senders must use. */
const IMF_FIXDATE = new RegExp(
  `^(?:${DAY_NAMES}), (\\d{2}) (${MONTH_NAMES}) (\\d{4}) ${TIME} GMT$`,
);
/** `Sunday, 06-Nov-94 08:49:37 GMT` (obsolete RFC 850). */
const RFC850_DATE = new RegExp(
  `^(?:${LONG_DAY_NAMES}), (\\d{2})-(${MONTH_NAMES})-(\\d{2}) ${TIME} GMT$`,
);
/** `Sun Nov  6 08:49:37 1994` (obsolete asctime). */
const ASCTIME_DATE = new RegExp(
  `^(?:${DAY_NAMES}) (${MONTH_NAMES}) ( \\d|\\d{2}) ${TIME} (\\d{4})$`,
);

/**
 * The wait a Retry-After value asks for, in ms from `nowMs`: at least 0 (a date in the past
 * means "now"), at most `maxMs`. undefined when the value is neither form, in which case the
 * caller falls back to its own backoff.
 */
export function parseRetryAfterMs(
  value: string,
  nowMs: number,
  maxMs: number = RETRY_AFTER_MAX_MS,
): number | undefined {
  const text = value.trim();
  if (/^\d+$/.test(text)) {
    // Parse the digits without overflow: anything over maxMs is cut anyway.
    const seconds = text.length > 15 ? Number.MAX_SAFE_INTEGER : Number(text);
    return Math.min(seconds * 1000, maxMs);
  }
  const dateMs = parseHttpDateMs(text, nowMs);
  if (dateMs === undefined) return undefined;
  return Math.min(Math.max(0, dateMs - nowMs), maxMs);
}

/** An HTTP-date as UTC ms, or undefined. `nowMs` resolves the two-digit year of RFC 850. */
export function parseHttpDateMs(text: string, nowMs: number): number | undefined {
  let m = IMF_FIXDATE.exec(text);
  if (m !== null) return civilToMs(Number(m[3]), m[2], Number(m[1]), m[4], m[5], m[6]);
  m = RFC850_DATE.exec(text);
  if (m !== null) {
    return civilToMs(fullYear(Number(m[3]), nowMs), m[2], Number(m[1]), m[4], m[5], m[6]);
  }
  m = ASCTIME_DATE.exec(text);
  if (m !== null) return civilToMs(Number(m[6]), m[1], Number(m[2]), m[3], m[4], m[5]);
  return undefined;
}

/**
 * RFC 9110 §5.6.7: a two-digit year that would be more than 50 years in the future is read as
 * the most recent past year with those digits.
 */
function fullYear(twoDigits: number, nowMs: number): number {
  const nowYear = civilFromDays(Math.floor(nowMs / DAY_MS)).year;
  let year = Math.floor(nowYear / 100) * 100 + twoDigits;
  if (year > nowYear + 50) year -= 100;
  return year;
}

function civilToMs(
  year: number,
  monthName: string | undefined,
  day: number,
  hh: string | undefined,
  mm: string | undefined,
  ss: string | undefined,
): number | undefined {
  const month = MONTHS.indexOf(monthName ?? '') + 1;
  const hour = Number(hh);
  const minute = Number(mm);
  // A leap second (60) is accepted by the grammar; one second early does no harm.
  const second = Math.min(Number(ss), 59);
  if (month < 1 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || Number(ss) > 60) return undefined;
  return daysFromCivil(year, month, day) * DAY_MS + ((hour * 60 + minute) * 60 + second) * 1000;
}
