/**
 * Operating errors of webhook delivery. A delivery failure is not thrown to the dispatcher: it
 * becomes an attempt outcome (webhook.ts). These classes cover what happens around an attempt:
 * bad options or secrets at start-up (ValidationError with a DELIVERY_* code) and the local
 * refusals of the pool registry, which classify.ts turns into a retry like any other failure.
 */
import { TickraftError } from '../base/errors.js';
import type { AttemptOutcome } from '../scheduler/model.js';

/** Options of OriginPools or FairQueue break a rule; every violation is listed. */
export const INVALID_OPTIONS = 'DELIVERY_INVALID_OPTIONS';
/** A signing secret is not `whsec_` + base64 of 24 to 64 bytes, or there are not 1–2 of them. */
export const INVALID_SECRET = 'DELIVERY_INVALID_SECRET';

/**
 * Codes an attempt can end with (AttemptReport.code). Stable strings: the dispatcher, metrics
 * and the DLQ listing branch on them, never on message text.
 */
export type DeliveryErrorCode =
  /** The target answered, with a status other than 2xx. */
  | 'DELIVERY_HTTP_STATUS'
  /** The attempt deadline passed, or a connect / headers / body timer of undici fired. */
  | 'DELIVERY_TIMEOUT'
  /** The target's host refused the TCP connection: nothing was sent. */
  | 'DELIVERY_CONNECTION_REFUSED'
  /** The target's host name did not resolve: nothing was sent. */
  | 'DELIVERY_DNS_FAILED'
  /** Reset, closed or unreachable connection, TLS failure: the request may have arrived. */
  | 'DELIVERY_CONNECTION_FAILED'
  /** The answer was not valid HTTP. */
  | 'DELIVERY_PROTOCOL_ERROR'
  /** The caller's signal ended the attempt (shutdown, lost leadership). */
  | 'DELIVERY_ABORTED'
  /** The request cannot be built: bad URL, reserved or malformed header, payload not JSON. */
  | 'DELIVERY_INVALID_REQUEST'
  /** OriginPools was closed; the request was never handed to a connection. */
  | 'DELIVERY_POOLS_CLOSED'
  /** OriginPools holds its maximum of origins, all busy; the request was never sent. */
  | 'DELIVERY_ORIGINS_EXHAUSTED'
  /** The delivery queue was full: back-pressure, the request was never sent. */
  | 'DELIVERY_QUEUE_FULL'
  /** The sender's leadership or lease ended while the attempt waited; it was never sent. */
  | 'DELIVERY_NOT_STARTED'
  /**
   * The target is an address webhooks may not reach (loopback, private, link-local…; see
   * target-policy.ts), or a name that resolved to one: refused before connecting, never retried.
   */
  | 'TARGET_FORBIDDEN'
  /** The job's tenant has no signing secret, so nothing can be signed or sent. */
  | 'DELIVERY_TENANT_UNKNOWN'
  /** No connected worker of the job's pool (with its tags) took the run in time: never leased. */
  | 'WORKER_UNAVAILABLE'
  /** The worker holding the lease neither renewed nor completed it within the lease bound. */
  | 'WORKER_LEASE_EXPIRED'
  /** The stream of the worker holding the lease ended before it completed the run. */
  | 'WORKER_DISCONNECTED'
  /** The worker completed the run as failed (retryable or not, as it said). */
  | 'WORKER_FAILED'
  /** This node accepts no worker leases (closed, or started without a worker hub). */
  | 'WORKER_HUB_CLOSED';

/**
 * A local refusal to deliver, carrying the classification an attempt would get
 * (retry / fail and retryAfterMs, decided by classify.ts).
 */
export class DeliveryError extends TickraftError {
  override readonly name = 'DeliveryError';
  declare readonly code: DeliveryErrorCode;
  readonly outcome: Exclude<AttemptOutcome, 'success'>;
  readonly retryAfterMs: number | undefined;

  constructor(
    code: DeliveryErrorCode,
    message: string,
    options: {
      outcome: Exclude<AttemptOutcome, 'success'>;
      retryAfterMs?: number;
      cause?: unknown;
    },
  ) {
    super(code, message, {
      cause: options.cause,
      details: { outcome: options.outcome, retryAfterMs: options.retryAfterMs },
    });
    this.outcome = options.outcome;
    this.retryAfterMs = options.retryAfterMs;
  }
}
