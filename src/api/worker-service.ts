/**
 * WorkerService.Work: one pull-based worker's stream on this node (DESIGN §7). The stream's
 * first message is the worker's hello; from then on the node's WorkerHub sends it leases of the
 * runs of groups this node leads, and every renewal or completion it sends is answered with an
 * ack. The hub decides; this file only translates messages and ends the stream with a status.
 */
import * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../base/errors.js';
import { formatInstant } from '../schedule/civil.js';
import type { WorkerCompletion, WorkerHub, WorkerSession } from '../delivery/worker-hub.js';
import type { Msg } from './convert.js';
import type { ApiLogger } from './service-kit.js';
import { toServiceError } from './status-map.js';

export interface WorkerServiceNode {
  readonly id: string;
  readonly workers: WorkerHub;
}

export function workerServiceHandlers(
  node: WorkerServiceNode,
  log: ApiLogger,
): grpc.UntypedServiceImplementation {
  return {
    Work: (call: grpc.ServerDuplexStream<Msg, unknown>) => serveWorker(call, node, log),
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
): void {
  let session: WorkerSession | undefined;
  let ended = false;
  const fail = (err: unknown): void => {
    if (ended) return;
    ended = true;
    session?.close();
    call.emit('error', toServiceError(err).error);
  };
  const write = (msg: unknown): void => {
    if (!ended) call.write(msg);
  };
  call.on('data', (m: Msg) => {
    try {
      const hello = sub(m, 'hello');
      if (session === undefined) {
        if (hello === undefined) {
          throw badMessage('hello', 'the first message of a Work stream must be hello');
        }
        const tags = Array.isArray(hello['tags']) ? (hello['tags'] as unknown[]).map(String) : [];
        session = node.workers.connect(
          {
            workerId: text(hello, 'workerId'),
            pool: text(hello, 'pool'),
            tags,
            capacity: int(hello, 'capacity'),
          },
          {
            lease: (l) =>
              write({
                lease: {
                  jobId: l.jobId,
                  tenant: l.tenant,
                  fireId: l.fireId,
                  slotMs: l.slotMs,
                  slot: formatInstant(l.slotMs),
                  attempt: l.attempt,
                  fencingToken: l.token,
                  payloadJson: l.payload,
                  leaseMs: l.leaseMs,
                  leaseDeadlineMs: l.leaseDeadlineMs,
                  nodeId: node.id,
                },
              }),
            revoke: (fireId, token, reason) =>
              write({ revoked: { fireId, fencingToken: token, reason } }),
            end: (reason) => {
              if (ended) return;
              ended = true;
              const md = new grpc.Metadata();
              md.set('tickraft-error-code', 'WORKER_HUB_CLOSED');
              call.emit('error', { code: grpc.status.UNAVAILABLE, details: reason, metadata: md });
            },
          },
        );
        log.info(
          { workerId: text(hello, 'workerId'), pool: text(hello, 'pool'), tags },
          'worker connected',
        );
        return;
      }
      if (hello !== undefined) throw badMessage('hello', 'may be sent only once');
      const renew = sub(m, 'renew');
      const complete = sub(m, 'complete');
      if (renew !== undefined) {
        const fireId = text(renew, 'fireId');
        const token = int(renew, 'fencingToken');
        const answer = session.renew(fireId, token);
        write({
          ack: {
            fireId,
            fencingToken: token,
            kind: 'renew',
            ok: answer.ok,
            reason: answer.ok ? '' : answer.reason,
            leaseDeadlineMs: answer.ok ? answer.leaseDeadlineMs : 0,
          },
        });
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
        const answer = session.complete(fireId, token, completion);
        write({
          ack: {
            fireId,
            fencingToken: token,
            kind: 'complete',
            ok: answer.ok,
            reason: answer.ok ? '' : answer.reason,
            leaseDeadlineMs: 0,
          },
        });
      } else if (sub(m, 'drain') !== undefined) {
        session.draining = true;
      } else {
        throw badMessage('renew', 'a message must carry hello, renew, complete or drain');
      }
    } catch (err) {
      fail(err);
    }
  });
  const closed = (): void => {
    if (session !== undefined) {
      log.info(
        { workerId: session.hello.workerId, pool: session.hello.pool },
        'worker disconnected',
      );
    }
    ended = true;
    session?.close();
  };
  call.on('end', () => {
    closed();
    call.end();
  });
  call.on('cancelled', closed);
  call.on('error', closed);
}

/** A malformed stream message: INVALID_ARGUMENT, naming the message field. */
function badMessage(field: string, reason: string): ValidationError {
  return new ValidationError('REQUEST_INVALID', [{ field, reason }]);
}
