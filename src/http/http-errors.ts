/**
 * Errors of the HTTP/JSON API as HTTP statuses and one JSON body shape (docs/HTTP.md, Errors):
 *
 *   {"code": 5, "status": "NOT_FOUND", "message": "job \"x\" does not exist",
 *    "details": {"error_code": "JOB_NOT_FOUND", "field_violations": [],
 *                "retry_delay_ms": 500, "leader": "n2", "correlation_id": "…"}}
 *
 * `code` and `status` are the gRPC status (number and name); `details` holds what the gRPC API
 * sends as metadata and google.rpc details (src/api/status-map.ts): the stable tickraft error
 * code, BadRequest's field violations, RetryInfo's delay, the leader hint and an INTERNAL
 * error's correlation id (the last three only when known). The HTTP status follows the gRPC code
 * as grpc-gateway and google.rpc.Code map it; FAILED_PRECONDITION is 400, as there.
 *
 * Errors of the HTTP layer itself (no route, wrong method, a body that is not JSON or too large)
 * take the same shape, with their own error codes (HTTP_…).
 */
import * as grpc from '@grpc/grpc-js';
import { randomUUID } from 'node:crypto';
import { ApiCallError } from '../api/client.js';
import { TickraftError, ValidationError } from '../base/errors.js';
import { PathEncodingError } from './path-template.js';

/** The HTTP status of each gRPC status code. */
const HTTP_STATUS: Readonly<Record<grpc.status, number>> = {
  [grpc.status.OK]: 200,
  // What nginx and grpc-gateway use for a request the client abandoned.
  [grpc.status.CANCELLED]: 499,
  [grpc.status.UNKNOWN]: 500,
  [grpc.status.INVALID_ARGUMENT]: 400,
  [grpc.status.DEADLINE_EXCEEDED]: 504,
  [grpc.status.NOT_FOUND]: 404,
  [grpc.status.ALREADY_EXISTS]: 409,
  [grpc.status.PERMISSION_DENIED]: 403,
  [grpc.status.RESOURCE_EXHAUSTED]: 429,
  [grpc.status.FAILED_PRECONDITION]: 400,
  [grpc.status.ABORTED]: 409,
  [grpc.status.OUT_OF_RANGE]: 400,
  [grpc.status.UNIMPLEMENTED]: 501,
  [grpc.status.INTERNAL]: 500,
  [grpc.status.UNAVAILABLE]: 503,
  [grpc.status.DATA_LOSS]: 500,
  [grpc.status.UNAUTHENTICATED]: 401,
};

export function httpStatusOf(code: grpc.status): number {
  return HTTP_STATUS[code] ?? 500;
}

/** Every HTTP status an API call may answer with an error body, for the OpenAPI document. */
export const ERROR_STATUSES: readonly number[] = [
  ...new Set(Object.values(HTTP_STATUS).filter((s) => s !== 200 && s !== 499 && s !== 501)),
].sort((a, b) => a - b);

export interface FieldViolationJson {
  readonly field: string;
  readonly description: string;
}

export interface ErrorBody {
  readonly code: number;
  readonly status: string;
  readonly message: string;
  readonly details: {
    readonly error_code: string;
    readonly field_violations: readonly FieldViolationJson[];
    readonly retry_delay_ms?: number;
    readonly leader?: string;
    readonly correlation_id?: string;
  };
}

export interface HttpError {
  readonly httpStatus: number;
  readonly body: ErrorBody;
  /** Extra response headers (Allow, Retry-After, WWW-Authenticate). */
  readonly headers: Readonly<Record<string, string>>;
}

/** An error of the HTTP layer: its HTTP status, the gRPC code it stands for and its own code. */
export class HttpApiError extends TickraftError {
  override readonly name = 'HttpApiError';
  constructor(
    readonly httpStatus: number,
    readonly grpcCode: grpc.status,
    code: string,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(code, message);
  }
}

function body(
  code: grpc.status,
  message: string,
  errorCode: string,
  extra: {
    violations?: readonly { field: string; reason: string }[];
    retryDelayMs?: number | undefined;
    leader?: string | undefined;
    correlationId?: string | undefined;
  } = {},
): ErrorBody {
  return {
    code,
    status: grpc.status[code] ?? 'UNKNOWN',
    message,
    details: {
      error_code: errorCode,
      field_violations: (extra.violations ?? []).map((v) => ({
        field: v.field,
        description: v.reason,
      })),
      ...(extra.retryDelayMs === undefined ? {} : { retry_delay_ms: extra.retryDelayMs }),
      ...(extra.leader === undefined ? {} : { leader: extra.leader }),
      ...(extra.correlationId === undefined ? {} : { correlation_id: extra.correlationId }),
    },
  };
}

function headersFor(status: number, retryDelayMs: number | undefined): Record<string, string> {
  const h: Record<string, string> = {};
  // RFC 6750: a refused bearer token is answered with the scheme to use.
  if (status === 401) h['www-authenticate'] = 'Bearer';
  if (retryDelayMs !== undefined && (status === 429 || status === 503))
    h['retry-after'] = String(Math.max(1, Math.ceil(retryDelayMs / 1000)));
  return h;
}

/** The error a gRPC call of the node's own API answered with, as the HTTP client gets it. */
export function fromServiceError(err: grpc.ServiceError): HttpError {
  const decoded = ApiCallError.from(err);
  const correlation = err.metadata?.get('tickraft-correlation-id')[0];
  const httpStatus = httpStatusOf(decoded.status);
  return {
    httpStatus,
    body: body(decoded.status, decoded.message, decoded.code, {
      violations: decoded.violations,
      retryDelayMs: decoded.retryDelayMs,
      leader: decoded.leaderHint,
      correlationId: typeof correlation === 'string' ? correlation : undefined,
    }),
    headers: headersFor(httpStatus, decoded.retryDelayMs),
  };
}

/**
 * An error raised in the HTTP layer. Anything unexpected is INTERNAL with a correlation id, which
 * `onInternal` is given to log with the original.
 */
export function fromLocalError(
  err: unknown,
  onInternal: (id: string, err: unknown) => void,
): HttpError {
  if (err instanceof HttpApiError)
    return {
      httpStatus: err.httpStatus,
      body: body(err.grpcCode, err.message, err.code),
      headers: { ...headersFor(err.httpStatus, undefined), ...err.headers },
    };
  if (err instanceof ValidationError || err instanceof PathEncodingError)
    return {
      httpStatus: 400,
      body: body(grpc.status.INVALID_ARGUMENT, err.message, err.code, {
        violations: err instanceof ValidationError ? err.violations : [],
      }),
      headers: {},
    };
  const id = randomUUID();
  onInternal(id, err);
  return {
    httpStatus: 500,
    body: body(grpc.status.INTERNAL, `internal error (correlation id ${id})`, 'INTERNAL', {
      correlationId: id,
    }),
    headers: {},
  };
}
