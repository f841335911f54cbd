/**
 * One webhook attempt: POST the run's JSON body to the job's URL through the origin's pool,
 * signed with the tenant's secret(s), within the job's attempt deadline, and report what
 * happened as an AttemptReport the dispatcher turns into an attempt-result command. Delivery
 * failures never throw: a refused connection, a timeout, a 500 or a malformed target are all
 * outcomes (classify.ts decides which). Only broken invariants (a non-integer token) assert.
 *
 * The body is `{jobId, tenant, fireId, slot, slotMs, attempt, fencingToken, payload}`, with
 * `jobId` the id the tenant knows (the job's key stripped of its tenant, job-key.ts), `fireId`
 * the whole fire id `<tenant>/<job id>:<slot ms>`, `slot` the ISO-8601 form of `slotMs` and `payload` the job's JSON text spliced in verbatim, so
 * numbers beyond 2^53 keep their digits. Headers: Idempotency-Key (the fire id, stable across
 * attempts), Tickraft-Fencing-Token, Tickraft-Scheduled-For (ISO), Tickraft-Attempt, and the
 * Standard Webhooks trio webhook-id (the fire id), webhook-timestamp and webhook-signature, plus
 * the job's own headers, which may not use any of these names.
 */
import { assert, assertionFailed } from '../base/assert.js';
import { SystemClock, type Clock } from '../base/clock.js';
import type { FieldViolation } from '../base/errors.js';
import { formatInstant } from '../schedule/civil.js';
import { jobIdOfKey } from '../scheduler/job-key.js';
import type { AttemptOutcome, Job } from '../scheduler/model.js';
import {
  classify,
  isProvablyUndelivered,
  observeError,
  RETRY_AFTER_MAX_MS,
  type AttemptObservation,
} from './classify.js';
import { DeliveryError, type DeliveryErrorCode } from './errors.js';
import type { OriginLease, OriginPools } from './origin-pools.js';
import { signWebhook, type SigningKeys } from './signing.js';
import { hostRefusalReason, type TargetPolicy } from './target-policy.js';
import { isWorkerUrl, workerTargetViolations } from './worker-target.js';

/** The fields of a job an attempt reads. */
export type WebhookJob = Pick<Job, 'id' | 'tenant' | 'target' | 'payload' | 'attemptDeadlineMs'>;

export interface WebhookAttempt {
  readonly job: WebhookJob;
  /** `<tenant>/<job id>:<slot ms>`: Idempotency-Key and webhook-id. */
  readonly fireId: string;
  readonly slotMs: number;
  /** 1-based. */
  readonly attempt: number;
  /** The fencing token authorised for this attempt. */
  readonly token: number;
  /** The tenant's secret(s), compiled once (signing.ts). */
  readonly signing: SigningKeys;
  /** Wall clock, UTC ms: webhook-timestamp, and the base of a Retry-After date. */
  readonly nowMs: number;
  /** The attempt span's W3C trace context (tracing on, src/observe/tracing.ts); else absent. */
  readonly traceparent?: string | undefined;
}

export interface WebhookLimits {
  /** Bytes of the response body kept as the excerpt. @default 512 */
  readonly responseExcerptBytes?: number;
  /**
   * Bytes of the response body kept as the attempt's full output (AttemptReport.output, kept
   * beside the log: run-output-store.ts); 0 keeps none. A body is read at least this far.
   * @default 0
   */
  readonly outputBytes?: number;
  /**
   * Bytes of a response body read to keep its connection reusable; a longer body is cut off by
   * destroying the connection instead. @default 65536
   */
  readonly responseDrainBytes?: number;
  /** @default RETRY_AFTER_MAX_MS (24 h) */
  readonly retryAfterMaxMs?: number;
}

export interface WebhookIo {
  readonly pools: OriginPools;
  /**
   * Ends the attempt early (shutdown, lost leadership): outcome retry, DELIVERY_ABORTED. One
   * listener is added per attempt in flight and removed when it ends, so a signal shared by many
   * concurrent attempts needs `events.setMaxListeners(0, signal)` to keep Node from warning.
   */
  readonly signal?: AbortSignal;
  /** Monotonic time for durationMs. @default SystemClock */
  readonly clock?: Clock;
  readonly limits?: WebhookLimits;
}

export interface AttemptReport {
  readonly outcome: AttemptOutcome;
  /** Absent on success. */
  readonly code?: DeliveryErrorCode;
  /** Present whenever the target answered. */
  readonly statusCode?: number;
  /** From the start of deliverWebhook to the end of reading the response, whole ms. */
  readonly durationMs: number;
  /** What went wrong, for the attempt record (also set on a success whose body read failed). */
  readonly error?: string;
  /** The first ≤ responseExcerptBytes of the body as UTF-8 text, never a cut character. */
  readonly responseExcerpt: string;
  /**
   * The first ≤ outputBytes of the body, the same way, when the limits ask for it and the target
   * answered: the attempt's full output, which the node keeps beside the log. `truncated`: the
   * body was longer.
   */
  readonly output?: AttemptOutput;
  /** A retry whose answer asked for at least this wait. */
  readonly retryAfterMs?: number;
  /**
   * True only when the request certainly never reached the target (classify.ts
   * isProvablyUndelivered): the one case where an at-most-once job may be retried.
   */
  readonly isProvablyUndelivered: boolean;
  /** A leased run: the worker that held the lease (its hello's worker id). */
  readonly worker?: string;
}

/** An attempt's output as delivery read it (run-output-store.ts keeps it). */
export interface AttemptOutput {
  readonly text: string;
  /** Cut at the bound: the output was longer. */
  readonly truncated: boolean;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Headers the job may not set: ours, and those undici or HTTP framing own. */
export const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  'host',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'proxy-connection',
  'idempotency-key',
]);
/** Prefixes reserved for tickraft's own and Standard Webhooks headers, present and future. */
export const RESERVED_HEADER_PREFIXES: readonly string[] = ['tickraft-', 'webhook-'];
export const TARGET_HEADERS_MAX = 32;
export const HEADER_VALUE_CHARS_MAX = 4096;
export const ATTEMPT_DEADLINE_MS_MAX = 3_600_000;
const USER_AGENT = 'tickraft-webhook/1';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Field content: visible ASCII, space, tab and obs-text; no CR, LF, NUL or chars above 0xFF. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Every rule the job's webhook settings break; the API runs it before a job is stored. With a
 * `targetPolicy` (the API passes the node's), a URL whose host is an address webhooks may not
 * reach, or `localhost`, is refused too; a name is checked when the pools connect.
 */
export function validateWebhookJob(
  job: WebhookJob,
  prefix = '',
  targetPolicy?: TargetPolicy,
): FieldViolation[] {
  return checkWebhookJob(job, prefix, targetPolicy).violations;
}

/**
 * Target checks already made, per target object. A job's target never changes in place (an
 * update stores a new one) and the state machine shares one object between every job with the
 * same URL and headers, so each is parsed and validated once, not at every attempt.
 */
const checkedTargets = new WeakMap<WebhookJob['target'], { ok: boolean; url: URL | undefined }>();
const NO_VIOLATIONS: FieldViolation[] = [];

function checkWebhookJobOnce(job: WebhookJob): ReturnType<typeof checkWebhookJob> {
  let target = checkedTargets.get(job.target);
  if (target === undefined) {
    const checked = checkWebhookJob({ ...job, attemptDeadlineMs: 1, payload: '' }, '');
    target = { ok: checked.violations.length === 0, url: checked.url };
    checkedTargets.set(job.target, target);
  }
  const payload = payloadJson(job.payload);
  if (target.ok && payload !== undefined && isValidDeadline(job.attemptDeadlineMs)) {
    return { violations: NO_VIOLATIONS, url: target.url, payload };
  }
  // Something is wrong: the full check names every field.
  return checkWebhookJob(job, '');
}

function isValidDeadline(ms: number): boolean {
  return Number.isSafeInteger(ms) && ms >= 1 && ms <= ATTEMPT_DEADLINE_MS_MAX;
}

/** Validation that also hands back what it parsed, so an attempt parses each field once. */
function checkWebhookJob(
  job: WebhookJob,
  prefix: string,
  targetPolicy?: TargetPolicy,
): { violations: FieldViolation[]; url: URL | undefined; payload: string | undefined } {
  const violations: FieldViolation[] = [];
  const add = (field: string, reason: string): void => {
    violations.push({ field: `${prefix}${field}`, reason });
  };
  if (isWorkerUrl(job.target.url)) {
    // Leased to pull-based workers (worker-target.ts): no HTTP request to check.
    violations.push(...workerTargetViolations(job.target.url, job.target.headers, prefix));
    if (job.target.completionTimeoutMs !== undefined)
      add(
        'target.completionTimeoutMs',
        'a worker target completes its runs itself (LeaseCompletion); asynchronous completion is for webhooks',
      );
    if (!isValidDeadline(job.attemptDeadlineMs)) {
      add('attemptDeadlineMs', `must be an integer in [1, ${ATTEMPT_DEADLINE_MS_MAX}]`);
    }
    const workerPayload = payloadJson(job.payload);
    if (workerPayload === undefined) add('payload', 'must be JSON text');
    return { violations, url: undefined, payload: workerPayload };
  }
  const url = parseTargetUrl(job.target.url);
  if (typeof url === 'string') add('target.url', url);
  else if (targetPolicy !== undefined) {
    const refusal = targetPolicy.checkHost(url.hostname);
    if (refusal !== undefined) add('target.url', hostRefusalReason(url.hostname, refusal));
  }
  const entries = Object.entries(job.target.headers);
  if (entries.length > TARGET_HEADERS_MAX) add('target.headers', `at most ${TARGET_HEADERS_MAX}`);
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    const field = `target.headers.${name}`;
    const lower = name.toLowerCase();
    if (!TOKEN.test(name)) add(field, 'name must be an HTTP token');
    else if (RESERVED_HEADER_NAMES.has(lower)) add(field, 'name is reserved');
    else if (RESERVED_HEADER_PREFIXES.some((p) => lower.startsWith(p))) {
      add(field, `names starting ${RESERVED_HEADER_PREFIXES.join(' or ')} are reserved`);
    } else if (seen.has(lower)) add(field, 'name repeats another in a different case');
    seen.add(lower);
    if (typeof value !== 'string' || !FIELD_VALUE.test(value)) {
      add(field, 'value must be text without CR, LF, NUL or characters above U+00FF');
    } else if (value.length > HEADER_VALUE_CHARS_MAX) {
      add(field, `value must be at most ${HEADER_VALUE_CHARS_MAX} characters`);
    }
  }
  if (!isValidDeadline(job.attemptDeadlineMs)) {
    add('attemptDeadlineMs', `must be an integer in [1, ${ATTEMPT_DEADLINE_MS_MAX}]`);
  }
  const payload = payloadJson(job.payload);
  if (payload === undefined) add('payload', 'must be JSON text');
  return { violations, url: typeof url === 'string' ? undefined : url, payload };
}

/** The pool key of a target URL, or undefined when it is not a usable http(s) URL. */
export function originOf(url: string): string | undefined {
  const parsed = parseTargetUrl(url);
  return typeof parsed === 'string' ? undefined : parsed.origin;
}

/** A parsed target URL, or why it cannot be one. */
/**
 * Parsed URLs and checked payloads by their text. Jobs of a tenant usually share a URL and often
 * a payload (the state machine interns them), so a spike of thousands of jobs parses each once
 * rather than at every attempt. URLs are never mutated after parsing. Bounded: cleared when full.
 */
const parsedUrls = new Map<string, URL | string>();
const checkedPayloads = new Map<string, string | undefined>();
const MEMO_MAX = 10_000;

function memo<V>(map: Map<string, V>, key: string, compute: (key: string) => V): V {
  if (map.has(key)) return map.get(key) as V;
  const value = compute(key);
  if (map.size >= MEMO_MAX) map.clear();
  map.set(key, value);
  return value;
}

function parseTargetUrl(text: string): URL | string {
  return memo(parsedUrls, text, parseTargetUrlOnce);
}

function parseTargetUrlOnce(text: string): URL | string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return 'scheme must be http or https (or worker:<pool> for pull-based workers)';
  }
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.hostname === '') return 'must name a host';
  return url;
}

/** The payload as it goes into the body: verbatim JSON text, `null` for an empty payload. */
function payloadJson(payload: string): string | undefined {
  // Only small payloads are remembered, so the memo stays small in bytes too.
  return payload.length <= 1024
    ? memo(checkedPayloads, payload, payloadJsonOnce)
    : payloadJsonOnce(payload);
}

function payloadJsonOnce(payload: string): string | undefined {
  if (payload.trim() === '') return 'null';
  try {
    JSON.parse(payload);
    return payload;
  } catch {
    return undefined;
  }
}

export interface WebhookRequest {
  readonly origin: string;
  /** Path and query. */
  readonly path: string;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** The exact request an attempt sends, or every reason it cannot be built. */
export function buildWebhookRequest(
  attempt: WebhookAttempt,
): { ok: true; request: WebhookRequest } | { ok: false; violations: FieldViolation[] } {
  const { job } = attempt;
  if (!Number.isSafeInteger(attempt.slotMs))
    assertionFailed(`slotMs must be an integer, got ${attempt.slotMs}`);
  assert(Number.isSafeInteger(attempt.attempt) && attempt.attempt >= 1, 'attempt must be ≥ 1');
  assert(Number.isSafeInteger(attempt.token) && attempt.token >= 0, 'token must be ≥ 0');
  const { violations, url, payload } = checkWebhookJobOnce(job);
  if (violations.length > 0 || url === undefined || payload === undefined) {
    return { ok: false, violations };
  }
  const slotIso = formatInstant(attempt.slotMs);
  const body =
    `{"jobId":${JSON.stringify(jobIdOfKey(job.id))},"tenant":${JSON.stringify(job.tenant)}` +
    `,"fireId":${JSON.stringify(attempt.fireId)},"slot":"${slotIso}","slotMs":${attempt.slotMs}` +
    `,"attempt":${attempt.attempt},"fencingToken":${attempt.token},"payload":${payload}}`;
  const timestampSec = Math.floor(attempt.nowMs / 1000);
  // One object literal (one hidden class for every attempt), then the job's own headers: the
  // validation keeps them off every name set here except user-agent, which they may replace.
  const headers: Record<string, string> = {
    'user-agent': USER_AGENT,
    'content-type': 'application/json',
    'idempotency-key': attempt.fireId,
    'tickraft-fencing-token': String(attempt.token),
    'tickraft-scheduled-for': slotIso,
    'tickraft-attempt': String(attempt.attempt),
    'webhook-id': attempt.fireId,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': signWebhook({ id: attempt.fireId, timestampSec, body }, attempt.signing),
  };
  const own = job.target.headers;
  for (const name in own) headers[name.toLowerCase()] = own[name] as string;
  // After the job's own: with tracing on, the request names the attempt's span.
  if (attempt.traceparent !== undefined) headers['traceparent'] = attempt.traceparent;
  return {
    ok: true,
    request: { origin: url.origin, path: url.pathname + url.search, headers, body },
  };
}

/** undici's own header and body timers are a backstop a little behind the attempt deadline. */
const BACKSTOP_MS = 1_000;

interface Limits {
  readonly responseExcerptBytes: number;
  readonly outputBytes: number;
  readonly responseDrainBytes: number;
  readonly retryAfterMaxMs: number;
}

/**
 * Makes one attempt. Resolves for every delivery failure; never rejects for one. `rendered` is
 * the attempt's request built ahead by buildWebhookRequest (the caller vouches that it is this
 * attempt's: same job settings, attempt and token); otherwise it is built here, with
 * `attempt.nowMs` as its timestamp.
 */
export async function deliverWebhook(
  attempt: WebhookAttempt,
  io: WebhookIo,
  rendered?: WebhookRequest,
): Promise<AttemptReport> {
  const clock = io.clock ?? SystemClock;
  const limits = limitsOf(io.limits);
  const startMs = clock.monotonicMs();
  // A function per attempt would cost a closure each; the ends below call toReport directly.
  const built: ReturnType<typeof buildWebhookRequest> =
    rendered !== undefined ? { ok: true, request: rendered } : buildWebhookRequest(attempt);
  if (!built.ok) {
    const reason = built.violations.map((v) => `${v.field}: ${v.reason}`).join('; ');
    const sent: Sent = { observation: { kind: 'invalid-request', reason } };
    return toReport(attempt, sent, elapsedMs(clock, startMs), limits);
  }
  if (io.signal?.aborted === true) {
    const sent: Sent = { observation: { kind: 'aborted', isBeforeDispatch: true } };
    return toReport(attempt, sent, elapsedMs(clock, startMs), limits);
  }
  let lease: OriginLease;
  try {
    lease = io.pools.acquire(built.request.origin);
  } catch (err) {
    if (
      err instanceof DeliveryError &&
      (err.code === 'DELIVERY_POOLS_CLOSED' || err.code === 'DELIVERY_ORIGINS_EXHAUSTED')
    ) {
      const sent: Sent = {
        observation: { kind: 'not-dispatched', code: err.code, reason: err.message },
      };
      return toReport(attempt, sent, elapsedMs(clock, startMs), limits);
    }
    throw err;
  }
  const sent = await send(lease, built.request, attempt.job.attemptDeadlineMs, io.signal, limits);
  return toReport(attempt, sent, elapsedMs(clock, startMs), limits);
}

function elapsedMs(clock: Clock, startMs: number): number {
  return Math.round(clock.monotonicMs() - startMs);
}

const DEFAULT_LIMITS: Limits = Object.freeze({
  responseExcerptBytes: 512,
  outputBytes: 0,
  responseDrainBytes: 65_536,
  retryAfterMaxMs: RETRY_AFTER_MAX_MS,
});
/** Limits compiled once per limits object (a runner passes the same one to every attempt). */
const compiledLimits = new WeakMap<WebhookLimits, Limits>();

function limitsOf(given: WebhookLimits | undefined): Limits {
  if (given === undefined) return DEFAULT_LIMITS;
  let limits = compiledLimits.get(given);
  if (limits === undefined) {
    const outputBytes = given.outputBytes ?? DEFAULT_LIMITS.outputBytes;
    limits = Object.freeze({
      responseExcerptBytes: given.responseExcerptBytes ?? DEFAULT_LIMITS.responseExcerptBytes,
      outputBytes,
      // The output is read up to its bound before a long body's connection is dropped.
      responseDrainBytes: Math.max(
        outputBytes,
        given.responseDrainBytes ?? DEFAULT_LIMITS.responseDrainBytes,
      ),
      retryAfterMaxMs: given.retryAfterMaxMs ?? DEFAULT_LIMITS.retryAfterMaxMs,
    });
    compiledLimits.set(given, limits);
  }
  return limits;
}

/** How an attempt ended: the observation to classify, and the body read if there was one. */
interface Sent {
  readonly observation: AttemptObservation;
  readonly read?: BodyRead;
}

interface BodyRead {
  readonly excerpt: string;
  readonly output?: AttemptOutput;
  readonly error?: string;
}

/**
 * Sends the request through undici's dispatch API with a handler of our own rather than
 * `request()`: the handler sees body chunks directly (no Readable stream per response) and gets
 * undici's abort function for the deadline (no AbortSignal per attempt).
 *
 * The handler implements undici 7's callbacks of the original handler interface (onConnect,
 * onHeaders, onData, onComplete, onError), which its types mark deprecated in favour of
 * onRequestStart … onResponseError, for their cost: undici 7's client still calls the original
 * interface, and wraps a handler of the new one in an adapter of two objects per request that
 * also turns the raw response headers and trailers into objects. This handler only looks for
 * Retry-After in the raw headers. `request()` itself is built on the same interface in undici 7.
 *
 * The attempt settles once: at the response's end, at an error, at the drain limit, or when the
 * deadline or the caller's signal ends it. If that happens while the request still waits in the
 * pool for a connection, it settles at once, and undici's onConnect (called before a request is
 * written) aborts it when its turn comes, so nothing is ever sent. The lease is returned when
 * undici is done with the request, which may be after the attempt settled.
 */
function send(
  lease: OriginLease,
  request: WebhookRequest,
  deadlineMs: number,
  signal: AbortSignal | undefined,
  limits: Limits,
): Promise<Sent> {
  return new Exchange(lease, signal, limits).start(request, deadlineMs);
}

/** undici's abort function for one request (onConnect). */
type Abort = (err?: Error) => void;

/**
 * The undici 7 handler callbacks this file implements (Dispatcher.DispatchHandler's original
 * interface; see send()).
 */
interface RawDispatchHandler {
  onConnect(abort: Abort): void;
  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, text: string): boolean;
  onData(chunk: Buffer): boolean;
  onComplete(trailers: unknown): void;
  onError(err: Error): void;
}

/** One request in flight: the undici dispatch handler, the deadline and the caller's signal. */
class Exchange implements RawDispatchHandler {
  private abortRequest: Abort | undefined;
  private abortReason: Error | undefined;
  private endedBy: 'deadline' | 'caller' | undefined;
  /** 0 until the final (non-1xx) status line arrived. */
  private statusCode = 0;
  private retryAfter: string | undefined;
  private readonly excerpt: ExcerptCollector;
  private timer: NodeJS.Timeout | undefined;
  private resolve: ((sent: Sent) => void) | undefined;
  private isReleased = false;

  constructor(
    private readonly lease: OriginLease,
    private readonly signal: AbortSignal | undefined,
    private readonly limits: Limits,
  ) {
    this.excerpt = new ExcerptCollector(Math.max(limits.responseExcerptBytes, limits.outputBytes));
  }

  start(request: WebhookRequest, deadlineMs: number): Promise<Sent> {
    const sent = new Promise<Sent>((resolve) => (this.resolve = resolve));
    this.timer = setTimeout(() => {
      const message = `attempt deadline of ${deadlineMs} ms passed`;
      this.stop('deadline', new DeliveryError('DELIVERY_TIMEOUT', message, { outcome: 'retry' }));
    }, deadlineMs);
    if (this.signal !== undefined) {
      // Only attempts with a signal pay for a bound listener.
      this.onCallerAbort = (): void => this.stop('caller', callerAbortReason());
      this.signal.addEventListener('abort', this.onCallerAbort, { once: true });
    }
    try {
      this.lease.pool.dispatch(
        {
          path: request.path,
          method: 'POST',
          headers: request.headers,
          body: request.body,
          headersTimeout: deadlineMs + BACKSTOP_MS,
          bodyTimeout: deadlineMs + BACKSTOP_MS,
        },
        // DispatchHandler's typings have these callbacks as deprecated members (see send()).
        this,
      );
    } catch (err) {
      // undici reports bad arguments through onError; a throw here is unexpected, and still an
      // outcome rather than a rejection.
      this.release();
      this.settle(this.failureSent(err));
    }
    return sent;
  }

  onConnect(abort: Abort): void {
    this.abortRequest = abort;
    // The attempt already ended while this request waited for a connection: never write it.
    if (this.abortReason !== undefined) abort(this.abortReason);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    if (statusCode < 200) return true; // 1xx informational: the final status is still to come
    this.statusCode = statusCode;
    this.retryAfter = retryAfterOf(rawHeaders);
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.excerpt.add(chunk);
    if (this.excerpt.totalBytes > this.limits.responseDrainBytes && this.resolve !== undefined) {
      // Reading megabytes nobody looks at costs more than a new handshake: settle with what was
      // kept and drop this connection.
      this.settle(this.responseSent());
      const limit = this.limits.responseDrainBytes;
      this.abortRequest?.(new Error(`response body over ${limit} bytes, not read`));
    }
    return true;
  }

  onComplete(): void {
    this.release();
    this.settle(this.responseSent());
  }

  onError(err: Error): void {
    this.release();
    // After the status line the target has answered: a cut body only shortens the excerpt.
    this.settle(
      this.statusCode > 0
        ? this.responseSent(`response body: ${err.message}`)
        : this.failureSent(err),
    );
  }

  private onCallerAbort: (() => void) | undefined;

  private stop(by: 'deadline' | 'caller', reason: Error): void {
    this.endedBy ??= by;
    this.abortReason ??= reason;
    if (this.abortRequest !== undefined) {
      // undici answers with onError, which settles.
      this.abortRequest(this.abortReason);
      return;
    }
    this.settle({
      observation:
        by === 'deadline'
          ? { kind: 'timeout', phase: 'queued' }
          : { kind: 'aborted', isBeforeDispatch: true },
    });
  }

  /** Resolves the attempt once; later endings (an abort's own error report) are ignored. */
  private settle(sent: Sent): void {
    const resolve = this.resolve;
    if (resolve === undefined) return;
    this.resolve = undefined;
    clearTimeout(this.timer);
    if (this.onCallerAbort !== undefined)
      this.signal?.removeEventListener('abort', this.onCallerAbort);
    resolve(sent);
  }

  /** Returns the lease once undici is done with the request (it may outlive the attempt). */
  private release(): void {
    if (this.isReleased) return;
    this.isReleased = true;
    this.lease.release();
  }

  private responseSent(bodyError?: string): Sent {
    const limits = this.limits;
    const collected = this.excerpt;
    const excerpt = collected.text(limits.responseExcerptBytes);
    const read: Mutable<BodyRead> = { excerpt };
    if (limits.outputBytes > 0) {
      // A body the excerpt holds whole is its own output: no second string.
      const text =
        collected.keptBytes <= limits.responseExcerptBytes &&
        collected.keptBytes <= limits.outputBytes
          ? excerpt
          : collected.text(limits.outputBytes);
      read.output = { text, truncated: collected.totalBytes > limits.outputBytes };
    }
    if (bodyError !== undefined) read.error = bodyError;
    return {
      observation: { kind: 'response', statusCode: this.statusCode, retryAfter: this.retryAfter },
      read,
    };
  }

  private failureSent(err: unknown): Sent {
    if (this.endedBy === 'deadline') return { observation: { kind: 'timeout', phase: 'deadline' } };
    if (this.endedBy === 'caller') {
      return { observation: { kind: 'aborted', isBeforeDispatch: false } };
    }
    return { observation: observeError(err) };
  }
}

/** The first Retry-After value among raw response headers (name, value, name, value, …). */
function retryAfterOf(rawHeaders: readonly Buffer[]): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as Buffer;
    // Only a name of the right length is decoded.
    if (name.length === 11 && name.toString('latin1').toLowerCase() === 'retry-after') {
      return (rawHeaders[i + 1] as Buffer).toString('latin1');
    }
  }
  return undefined;
}

function callerAbortReason(): DeliveryError {
  return new DeliveryError('DELIVERY_ABORTED', 'aborted by the dispatcher', { outcome: 'retry' });
}

/** Keeps the first `limitBytes` of a body and counts the rest. */
class ExcerptCollector {
  private kept: Buffer[] = [];
  keptBytes = 0;
  totalBytes = 0;

  constructor(private readonly limitBytes: number) {}

  add(chunk: Buffer): void {
    if (this.keptBytes < this.limitBytes) {
      // A copy: undici may reuse the memory behind a chunk once the callback returns.
      const part = Buffer.from(chunk.subarray(0, this.limitBytes - this.keptBytes));
      this.kept.push(part);
      this.keptBytes += part.length;
    }
    this.totalBytes += chunk.length;
  }

  /** The first ≤ `limitBytes` as UTF-8 text, ending at the last whole character. */
  text(limitBytes: number): string {
    if (this.kept.length > 1) this.kept = [Buffer.concat(this.kept)];
    const all = this.kept[0] ?? EMPTY;
    const bytes = all.length <= limitBytes ? all : all.subarray(0, limitBytes);
    return bytes.toString('utf8', 0, wholeUtf8Length(bytes));
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * The length of `bytes` without a trailing, incomplete UTF-8 sequence, so that an excerpt cut
 * mid-character ends at the last whole one rather than with U+FFFD. Only the last 1–3 bytes can
 * belong to a cut sequence; invalid bytes elsewhere decode as U+FFFD as usual.
 */
export function wholeUtf8Length(bytes: Uint8Array): number {
  const n = bytes.length;
  for (let back = 1; back <= Math.min(3, n); back++) {
    const b = bytes[n - back] as number;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: keep looking for the lead
    // The lead byte's sequence length: 0xxxxxxx 1, 110xxxxx 2, 1110xxxx 3, 11110xxx 4.
    const need = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return back < need ? n - back : n;
  }
  return n;
}

function toReport(
  attempt: WebhookAttempt,
  sent: Sent,
  durationMs: number,
  limits: Limits,
): AttemptReport {
  const { observation, read } = sent;
  // A Retry-After date counts from when the answer came, not from when the attempt started.
  const c = classify(observation, {
    nowMs: attempt.nowMs + durationMs,
    retryAfterMaxMs: limits.retryAfterMaxMs,
  });
  const error = c.outcome === 'success' ? read?.error : c.reason;
  // Built field by field (no spread of temporary objects): one report per attempt.
  const report: Mutable<AttemptReport> = {
    outcome: c.outcome,
    durationMs: Math.max(0, durationMs),
    responseExcerpt: read?.excerpt ?? '',
    isProvablyUndelivered: isProvablyUndelivered(observation),
  };
  if (c.code !== undefined) report.code = c.code;
  if (observation.kind === 'response') report.statusCode = observation.statusCode;
  if (error !== undefined) report.error = error;
  if (c.retryAfterMs !== undefined) report.retryAfterMs = c.retryAfterMs;
  if (read?.output !== undefined) report.output = read.output;
  return report;
}
