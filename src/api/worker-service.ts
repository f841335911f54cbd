/**
 * WorkerService.Work: one pull-based worker's stream on this node (docs/API.md, Workers). The
 * stream's first message is the worker's hello; from then on the node's WorkerHub sends it leases
 * of the runs of groups this node leads, and every renewal or completion it sends is answered with
 * an ack. The hub decides; this file only translates messages and ends the stream with a status.
 */
import * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../base/errors.js';
import { formatInstant } from '../schedule/civil.js';
import { jobIdOfKey } from '../scheduler/job-key.js';
import type {
  LeaseAnswer,
  WorkerCompletion,
  WorkerHub,
  WorkerSession,
} from '../delivery/worker-hub.js';
import type { TokenStanding } from '../auth/authenticator.js';
import type { Principal } from '../auth/principal.js';
import { assertionFailed } from '../base/assert.js';
import { principalOf } from './call-principal.js';
import type { Msg } from './convert.js';
import type { ApiLogger } from './service-kit.js';
import { toServiceError } from './status-map.js';

export interface WorkerServiceNode {
  readonly id: string;
  readonly workers: WorkerHub;
}

/** How often an open Work stream checks that its token was not revoked meanwhile. */
export const STREAM_RECHECK_MS = 1000;

export function workerServiceHandlers(
  node: WorkerServiceNode,
  log: ApiLogger,
  /** Whether a principal admitted when its stream opened may go on (Authenticator.stillValid). */
  stillValid: (p: Principal) => TokenStanding,
): grpc.UntypedServiceImplementation {
  return {
    Work: (call: grpc.ServerDuplexStream<Msg, unknown>) => serveWorker(call, node, log, stillValid),
  };
}

function sub(m: Msg, key: string): Msg | undefined {
  const v = m[key];
  return typeof v === 'object' && v !== null ? (v as Msg) : undefined;
}

function text(m: Msg, key: string): string {
  const v = m[key];
  return typeof v === 'string' ? v : '';
}

function int(m: Msg, key: string): number {
  const v = m[key];
  return typeof v === 'number' ? v : 0;
}

function serveWorker(
  call: grpc.ServerDuplexStream<Msg, unknown>,
  node: WorkerServiceNode,
  log: ApiLogger,
  stillValid: (p: Principal) => TokenStanding,
): void {
  // The caller may have gone while its credentials were checked.
  if (call.cancelled) return;
  const principal = principalOf(call);
  if (principal === undefined) assertionFailed('a Work stream reached its handler unauthenticated');
  const stream = new WorkerStream(call, node, log, principal);
  // A token revoked while its stream is open ends the stream (its leases return their runs)
  // within REVOCATION_BOUND_MS, as it would end any new call.
  const recheck = setInterval(() => {
    const standing = stillValid(principal);
    if (standing !== 'valid') stream.revoked(standing);
  }, STREAM_RECHECK_MS);
  recheck.unref();
  const stop = (): void => clearInterval(recheck);
  call.on('end', stop);
  call.on('cancelled', stop);
  call.on('error', stop);
  call.on('close', stop);
  call.on('data', (m: Msg) => stream.onMessage(m));
  call.on('end', () => {
    stream.closed();
    call.end();
  });
  call.on('cancelled', () => stream.closed());
  call.on('error', () => stream.closed());
}

/** One Work stream: its session in the hub once the hello arrived, and its replies. */
class WorkerStream {
  private session: WorkerSession | undefined;
  private ended = false;

  constructor(
    private readonly call: grpc.ServerDuplexStream<Msg, unknown>,
    private readonly node: WorkerServiceNode,
    private readonly log: ApiLogger,
    private readonly principal: Principal,
  ) {}

  onMessage(m: Msg): void {
    try {
      const hello = sub(m, 'hello');
      if (this.session === undefined) {
        if (hello === undefined) {
          throw badMessage('hello', 'the first message of a Work stream must be hello');
        }
        this.session = this.connect(hello);
        return;
      }
      if (hello !== undefined) throw badMessage('hello', 'may be sent only once');
      this.answer(this.session, m);
    } catch (err) {
      this.fail(err);
    }
  }

  private connect(hello: Msg): WorkerSession {
    const tags = Array.isArray(hello['tags']) ? (hello['tags'] as unknown[]).map(String) : [];
    const principal = this.principal;
    const session = this.node.workers.connect(
      {
        // A tenant's worker token leases only that tenant's runs; an admin's, any tenant's.
        tenant: principal.kind === 'tenant' ? principal.tenant : undefined,
        workerId: text(hello, 'workerId'),
        pool: text(hello, 'pool'),
        tags,
        capacity: int(hello, 'capacity'),
      },
      {
        lease: (l) =>
          this.write({
            lease: {
              // The job id its tenant knows; the fire id keeps the key, tenant and all.
              jobId: jobIdOfKey(l.jobId),
              tenant: l.tenant,
              fireId: l.fireId,
              slotMs: l.slotMs,
              slot: formatInstant(l.slotMs),
              attempt: l.attempt,
              fencingToken: l.token,
              payloadJson: l.payload,
              leaseMs: l.leaseMs,
              leaseDeadlineMs: l.leaseDeadlineMs,
              nodeId: this.node.id,
              outputMaxBytes: l.outputMaxBytes,
            },
          }),
        revoke: (fireId, token, reason) =>
          this.write({ revoked: { fireId, fencingToken: token, reason } }),
        end: (reason) => this.endUnavailable(reason),
      },
    );
    this.log.info(
      { workerId: session.hello.workerId, pool: session.hello.pool, tags },
      'worker connected',
    );
    return session;
  }

  /**
   * A renewal or a completion, answered with an ack; a part of a run's output, answered only
   * when refused (a worker streaming lines would otherwise get an ack per line); a drain.
   */
  private answer(session: WorkerSession, m: Msg): void {
    const renew = sub(m, 'renew');
    const complete = sub(m, 'complete');
    const output = sub(m, 'output');
    if (output !== undefined) {
      const fireId = text(output, 'fireId');
      const token = int(output, 'fencingToken');
      const answer = session.output(fireId, token, text(output, 'chunk'));
      if (!answer.ok) this.ack('output', fireId, token, answer);
    } else if (renew !== undefined) {
      const fireId = text(renew, 'fireId');
      const token = int(renew, 'fencingToken');
      this.ack('renew', fireId, token, session.renew(fireId, token));
    } else if (complete !== undefined) {
      const fireId = text(complete, 'fireId');
      const token = int(complete, 'fencingToken');
      const retryAfter = complete['retryAfterMs'];
      const completion: WorkerCompletion = {
        success: complete['success'] === true,
        retryable: complete['retryable'] === true,
        error: text(complete, 'error'),
        retryAfterMs: typeof retryAfter === 'number' ? retryAfter : undefined,
        output: text(complete, 'output'),
      };
      this.ack('complete', fireId, token, session.complete(fireId, token, completion));
    } else if (sub(m, 'drain') !== undefined) {
      session.draining = true;
    } else {
      throw badMessage('renew', 'a message must carry hello, renew, complete, output or drain');
    }
  }

  private ack(kind: string, fireId: string, token: number, answer: LeaseAnswer): void {
    this.write({
      ack: {
        fireId,
        fencingToken: token,
        kind,
        ok: answer.ok,
        reason: answer.ok ? '' : answer.reason,
        leaseDeadlineMs: answer.ok && kind === 'renew' ? answer.leaseDeadlineMs : 0,
      },
    });
  }

  private write(msg: unknown): void {
    if (!this.ended) this.call.write(msg);
  }

  private fail(err: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.session?.close();
    this.call.emit('error', toServiceError(err).error);
  }

  /** The hub closes (the node shuts down): the worker should reconnect elsewhere or later. */
  private endUnavailable(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    const md = new grpc.Metadata();
    md.set('tickraft-error-code', 'WORKER_HUB_CLOSED');
    this.call.emit('error', { code: grpc.status.UNAVAILABLE, details: reason, metadata: md });
  }

  /**
   * The stream's token was revoked (UNAUTHENTICATED), or this node can no longer confirm it was
   * not (UNAVAILABLE: reconnect, to another node if need be); its leases return their runs.
   */
  revoked(standing: 'revoked' | 'unconfirmed'): void {
    if (this.ended) return;
    this.ended = true;
    this.session?.close();
    const revoked = standing === 'revoked';
    const md = new grpc.Metadata();
    md.set('tickraft-error-code', revoked ? 'AUTH_UNKNOWN_TOKEN' : 'AUTH_UNAVAILABLE');
    this.log.info(
      { workerId: this.session?.hello.workerId, tokenId: this.principal.tokenId, standing },
      'worker stream ended: its token was revoked or cannot be confirmed',
    );
    this.call.emit('error', {
      code: revoked ? grpc.status.UNAUTHENTICATED : grpc.status.UNAVAILABLE,
      details: revoked
        ? 'the token of this stream was revoked'
        : 'this node cannot confirm the token of this stream is still valid (the meta group is unreachable from it)',
      metadata: md,
    });
  }

  /** The stream ended from the worker's side (or failed): its leases return their runs. */
  closed(): void {
    const session = this.session;
    this.ended = true;
    if (session === undefined || !session.isOpen) return;
    this.log.info(
      { workerId: session.hello.workerId, pool: session.hello.pool },
      'worker disconnected',
    );
    session.close();
  }
}

/** A malformed stream message: INVALID_ARGUMENT, naming the message field. */
function badMessage(field: string, reason: string): ValidationError {
  return new ValidationError('REQUEST_INVALID', [{ field, reason }]);
}
