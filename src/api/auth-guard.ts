/**
 * Authentication and the method-level authorization in front of every handler of every service
 * a node serves: the call's `authorization` metadata becomes a Principal (src/auth), the
 * method's requirement (src/auth/method-policy.ts) is checked, and only then does the handler
 * run, with the principal bound to the call. Every admin-only call and every refused call on an
 * admin-only method is written to the audit log with the principal, the method and the outcome.
 */
import type * as grpc from '@grpc/grpc-js';
import { status as grpcStatusCodes } from '@grpc/grpc-js';
import type { CallTracing } from './api-node.js';
import type { Authenticator } from '../auth/authenticator.js';
import { authorize, requirementOf } from '../auth/method-policy.js';
import { describePrincipal, type Principal } from '../auth/principal.js';
import { AUTHORIZATION_METADATA } from '../auth/token-secret.js';
import { bindPrincipal } from './call-principal.js';
import { FORWARDED_HEADER } from './router.js';
import type { ApiLogger } from './service-kit.js';
import { toServiceError } from './status-map.js';

interface GuardedCall {
  readonly metadata: grpc.Metadata;
}

/** Wraps every handler of `impl` (the methods of `def`) behind the guard. */
export function guardService(
  serviceName: string,
  def: grpc.ServiceDefinition,
  impl: grpc.UntypedServiceImplementation,
  auth: Authenticator,
  log: ApiLogger,
  /** Spans of the calls (the node's tracing); none by default. */
  tracing: CallTracing = NO_CALL_TRACING,
): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(impl)) {
    const method = `${serviceName}.${name}`;
    const m = def[name];
    if (!m) throw new Error(`${serviceName} has no method ${name}`);
    const admit = (call: GuardedCall): Promise<Principal> =>
      admitCall(method, call.metadata, auth, log).then((p) => {
        bindPrincipal(call, p);
        return p;
      });
    if (!m.requestStream && !m.responseStream) {
      const inner = handler as grpc.handleUnaryCall<unknown, unknown>;
      out[name] = ((call, callback) => {
        // A span per call when tracing is on, ended with the call's status; nothing otherwise.
        const traced = tracing.enabled ? tracing.apiCall(method) : undefined;
        const cb: grpc.sendUnaryData<unknown> =
          traced === undefined
            ? callback
            : (err, value) => {
                traced(err ? (grpcStatusName(err.code) ?? 'UNKNOWN') : 'OK');
                callback(err, value);
              };
        admit(call).then(
          (p) => {
            // Operators' admin calls are audited; the nodes' own calls to each other are not
            // (one CreateJobs fans out to several), unless refused.
            const audited = requirementOf(method) === 'admin';
            inner(
              call,
              audited
                ? (err, value) => {
                    auditOutcome(log, method, p, call.metadata, err);
                    cb(err, value);
                  }
                : cb,
            );
          },
          (err: unknown) => cb(toServiceError(err).error),
        );
      }) satisfies grpc.handleUnaryCall<unknown, unknown>;
    } else if (m.requestStream && m.responseStream) {
      const inner = handler as grpc.handleBidiStreamingCall<unknown, unknown>;
      out[name] = ((call) => {
        admit(call).then(
          () => inner(call),
          (err: unknown) => call.emit('error', toServiceError(err).error),
        );
      }) satisfies grpc.handleBidiStreamingCall<unknown, unknown>;
    } else if (!m.requestStream && m.responseStream) {
      const inner = handler as grpc.handleServerStreamingCall<unknown, unknown>;
      out[name] = ((call) => {
        admit(call).then(
          () => inner(call),
          (err: unknown) => call.emit('error', toServiceError(err).error),
        );
      }) satisfies grpc.handleServerStreamingCall<unknown, unknown>;
    } else {
      // No RPC streams only its requests; a new shape must be guarded before it is served.
      throw new Error(`${method}: no guard for this streaming shape`);
    }
  }
  return out;
}

async function admitCall(
  method: string,
  md: grpc.Metadata,
  auth: Authenticator,
  log: ApiLogger,
): Promise<Principal> {
  const need = requirementOf(method);
  const headers = md.get(AUTHORIZATION_METADATA).map((v) => (typeof v === 'string' ? v : ''));
  let p: Principal;
  try {
    p = await auth.authenticate(headers);
  } catch (err) {
    if (need === 'admin' || need === 'node')
      auditOutcome(log, method, undefined, md, toServiceError(err).error);
    throw err;
  }
  try {
    authorize(p, need, method);
  } catch (err) {
    auditOutcome(log, method, p, md, toServiceError(err).error);
    throw err;
  }
  return p;
}

function auditOutcome(
  log: ApiLogger,
  method: string,
  p: Principal | undefined,
  md: grpc.Metadata,
  err: Partial<grpc.StatusObject> | null,
): void {
  const code = err?.metadata?.get('tickraft-error-code')[0];
  log.info(
    {
      audit: true,
      principal: p === undefined ? 'unauthenticated' : describePrincipal(p),
      method,
      forwarded: md.get(FORWARDED_HEADER).length > 0,
      outcome: err ? (typeof code === 'string' ? code : String(err.code ?? 'UNKNOWN')) : 'OK',
      ...(err ? { reason: err.details } : {}),
    },
    'audit',
  );
}

/** `UNAVAILABLE` for 14: the status's name as spans record it. */
function grpcStatusName(code: number | undefined): string | undefined {
  return code === undefined ? undefined : grpcStatusCodes[code];
}

const NO_CALL_TRACING: CallTracing = { enabled: false, apiCall: () => () => {} };
