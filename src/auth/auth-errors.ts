/** The errors of authentication and authorization; status-map.ts turns their codes into statuses. */
import { TickraftError } from '../base/errors.js';

/** No credential, a malformed one, or one no node knows (never issued or revoked): UNAUTHENTICATED. */
export class UnauthenticatedError extends TickraftError {
  override readonly name = 'UnauthenticatedError';
}

/** A known principal asking for what its role or tenant does not allow: PERMISSION_DENIED. */
export class PermissionDeniedError extends TickraftError {
  override readonly name = 'PermissionDeniedError';
}

/**
 * This node cannot confirm its copy of the token list is current (it cannot reach the meta
 * group's leader), so it cannot tell whether a token was revoked: UNAVAILABLE, try another node.
 */
export class AuthUnavailableError extends TickraftError {
  override readonly name = 'AuthUnavailableError';
}
