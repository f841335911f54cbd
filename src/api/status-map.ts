/**
 * The one place that turns tickraft errors into gRPC statuses (docs/API.md, Errors): a stable error code
 * picks the status, the code travels in `tickraft-error-code` metadata, a leader hint in
 * `tickraft-leader`, and field violations and retry hints as google.rpc details in
 * `grpc-status-details-bin`. Anything unrecognised is INTERNAL with a correlation id and no
 * stack; the caller logs the original under the same id.
 */
import * as grpc from '@grpc/grpc-js';
import { randomUUID } from 'node:crypto';
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import { encodeRpcStatus } from './rpc-status.js';

const STATUS_OF_CODE: Readonly<Record<string, grpc.status>> = {
  RAFT_NOT_LEADER: grpc.status.UNAVAILABLE,
  RAFT_PROPOSAL_UNKNOWN: grpc.status.UNAVAILABLE,
  RAFT_READ_FAILED: grpc.status.UNAVAILABLE,
  RAFT_PROPOSAL_DROPPED: grpc.status.UNAVAILABLE,
  GROUP_NO_LEADER: grpc.status.UNAVAILABLE,
  ROUTE_STALE: grpc.status.UNAVAILABLE,
  NODE_UNREACHABLE: grpc.status.UNAVAILABLE,
  BULK_INCOMPLETE: grpc.status.UNAVAILABLE,
  REQUEST_INVALID: grpc.status.INVALID_ARGUMENT,
  WORKER_HELLO_INVALID: grpc.status.INVALID_ARGUMENT,
  WORKER_HUB_CLOSED: grpc.status.UNAVAILABLE,
  JOB_SPEC_INVALID: grpc.status.INVALID_ARGUMENT,
  TENANT_INVALID: grpc.status.INVALID_ARGUMENT,
  JOB_NOT_FOUND: grpc.status.NOT_FOUND,
  RUN_NOT_FOUND: grpc.status.NOT_FOUND,
  RUN_ATTEMPT_NOT_FOUND: grpc.status.NOT_FOUND,
  META_NO_MEMBER: grpc.status.NOT_FOUND,
  TENANT_NOT_FOUND: grpc.status.NOT_FOUND,
  JOB_ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  TENANT_ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  JOB_VERSION_CONFLICT: grpc.status.ABORTED,
  TENANT_CONFLICT: grpc.status.ABORTED,
  RUN_WRONG_STATE: grpc.status.FAILED_PRECONDITION,
  FENCING_TOKEN_STALE: grpc.status.FAILED_PRECONDITION,
  TRANSFER_INVALID: grpc.status.FAILED_PRECONDITION,
  DEADLINE_EXCEEDED: grpc.status.DEADLINE_EXCEEDED,
  // Membership (src/placement/membership-state.ts, src/cluster/membership-admin.ts).
  META_MEMBER_EXISTS: grpc.status.ALREADY_EXISTS,
  META_ADDRESS_IN_USE: grpc.status.ALREADY_EXISTS,
  META_MEMBER_INVALID: grpc.status.INVALID_ARGUMENT,
  META_MEMBER_REMOVED: grpc.status.FAILED_PRECONDITION,
  META_MEMBER_HAS_REPLICAS: grpc.status.FAILED_PRECONDITION,
  META_NO_GROUP: grpc.status.NOT_FOUND,
  META_NO_MOVE: grpc.status.NOT_FOUND,
  META_MOVE_INVALID: grpc.status.FAILED_PRECONDITION,
  META_MOVE_IN_FLIGHT: grpc.status.FAILED_PRECONDITION,
  META_MOVE_PHASE: grpc.status.FAILED_PRECONDITION,
  MEMBERSHIP_CHANGE_REFUSED: grpc.status.UNAVAILABLE,
  NODE_STILL_REACHABLE: grpc.status.FAILED_PRECONDITION,
  // A joining node whose peer address does not prove a certificate of the cluster's CA.
  PEER_TLS_UNVERIFIED: grpc.status.PERMISSION_DENIED,
  // Range splits (src/placement/split-state.ts, src/cluster/split-admin.ts).
  META_SPLIT_IN_FLIGHT: grpc.status.FAILED_PRECONDITION,
  META_SPLIT_INVALID: grpc.status.FAILED_PRECONDITION,
  META_NO_SPLIT: grpc.status.NOT_FOUND,
  SPLIT_INVALID: grpc.status.FAILED_PRECONDITION,
  GROUP_QUORUM_LOST: grpc.status.FAILED_PRECONDITION,
  // Authentication and authorization (src/auth).
  AUTH_MISSING: grpc.status.UNAUTHENTICATED,
  AUTH_MALFORMED: grpc.status.UNAUTHENTICATED,
  AUTH_UNKNOWN_TOKEN: grpc.status.UNAUTHENTICATED,
  AUTH_UNAVAILABLE: grpc.status.UNAVAILABLE,
  PERMISSION_DENIED: grpc.status.PERMISSION_DENIED,
  TOKEN_NOT_FOUND: grpc.status.NOT_FOUND,
  TOKEN_ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  // Tenant limits (src/api/tenant-quota.ts).
  TENANT_WRITE_RATE_EXCEEDED: grpc.status.RESOURCE_EXHAUSTED,
  TENANT_MAX_JOBS_EXCEEDED: grpc.status.RESOURCE_EXHAUSTED,
};

/** How long a client should wait before retrying a call that found no leader. */
export const NO_LEADER_RETRY_MS = 500;

/** An error for a group without a known leader: UNAVAILABLE with a retry hint. */
export class GroupUnavailableError extends TickraftError {
  override readonly name = 'GroupUnavailableError';
  constructor(groupId: number, reason: string) {
    super('GROUP_NO_LEADER', `group ${groupId}: ${reason}; retry in ${NO_LEADER_RETRY_MS} ms`, {
      details: { groupId, retryDelayMs: NO_LEADER_RETRY_MS },
    });
  }
}

/**
 * Field paths as the API names them: snake_case segments (`spec.retry.maxAttempts` →
 * `spec.retry.max_attempts`). Header names after `headers.` are the client's own and are kept.
 */
export function apiFieldPath(field: string): string {
  const parts = field.split('.');
  return parts
    .map((p, i) => (i > 0 && parts[i - 1] === 'headers' ? p : snake(p)))
    .join('.')
    .replace(/(^|\.)spec\.payload$/, '$1spec.payload_json');
}

function snake(segment: string): string {
  return segment.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

export function isServiceError(err: unknown): err is grpc.ServiceError {
  return (
    err instanceof Error &&
    typeof (err as { code?: unknown }).code === 'number' &&
    'metadata' in err
  );
}

export interface MappedError {
  readonly error: grpc.ServiceError;
  /** Set for INTERNAL: the id the reply shows and the log must carry. */
  readonly correlationId: string | undefined;
}

export function toServiceError(err: unknown): MappedError {
  // An error from a forwarded call is passed on as the leader answered it.
  if (isServiceError(err)) return { error: err, correlationId: undefined };
  const md = new grpc.Metadata();
  if (!(err instanceof TickraftError) || STATUS_OF_CODE[err.code] === undefined) {
    const correlationId = randomUUID();
    const message = `internal error (correlation id ${correlationId})`;
    md.set('tickraft-error-code', 'INTERNAL');
    md.set('tickraft-correlation-id', correlationId);
    return { error: serviceError(grpc.status.INTERNAL, message, md), correlationId };
  }
  const status = STATUS_OF_CODE[err.code]!;
  md.set('tickraft-error-code', err.code);
  const leader = (err as { leaderHint?: unknown }).leaderHint ?? err.details['leaderHint'];
  if (typeof leader === 'string' && leader !== '') md.set('tickraft-leader', leader);
  let violations: FieldViolation[] = [];
  let message = err.message;
  if (err instanceof ValidationError) {
    violations = err.violations.map((v) => ({ field: apiFieldPath(v.field), reason: v.reason }));
    message = violations.map((v) => `${v.field}: ${v.reason}`).join('; ');
  }
  const retry = err.details['retryDelayMs'];
  const retryDelayMs =
    typeof retry === 'number'
      ? retry
      : status === grpc.status.UNAVAILABLE
        ? NO_LEADER_RETRY_MS
        : undefined;
  if (retryDelayMs !== undefined) md.set('retry-after-ms', String(retryDelayMs));
  md.set(
    'grpc-status-details-bin',
    encodeRpcStatus({ code: status, message, violations, retryDelayMs }),
  );
  return { error: serviceError(status, message, md), correlationId: undefined };
}

function serviceError(
  code: grpc.status,
  message: string,
  metadata: grpc.Metadata,
): grpc.ServiceError {
  return Object.assign(new Error(message), { code, details: message, metadata });
}
