/**
 * Joining a running cluster from an empty node: AdminService.AddNode through any member's client
 * API (that member forwards it to the meta leader), retried while the cluster is merely busy (no
 * leader for a moment, the member restarting), and failed at once when the cluster refuses (an
 * id or address already in use): the node must not start under an identity it does not own.
 */
import * as grpc from '@grpc/grpc-js';
import { ApiCallError, ApiClient, type ClientTlsOptions } from '../api/client.js';
import type { NodeId } from '../raft/messages.js';
import type { NodeLogger } from './node.js';

export interface JoinRequest {
  /** host:port of a member's client API. */
  readonly via: string;
  readonly nodeId: NodeId;
  readonly peerAddress: string;
  readonly apiAddress: string;
  /** The cluster admin token (AddNode is an admin call); undefined without authentication. */
  readonly token: string | undefined;
  readonly deadlineMs: number;
  /** The member's client API serves TLS: dial it with this node's API certificate and CA. */
  readonly tls?: ClientTlsOptions;
}

const RETRY_MS = 500;

function isTransient(err: unknown): boolean {
  if (!(err instanceof ApiCallError)) return false;
  return err.status === grpc.status.UNAVAILABLE || err.status === grpc.status.DEADLINE_EXCEEDED;
}

/** Registers the node; resolves with every member's peer address. */
export async function joinCluster(req: JoinRequest): Promise<Map<NodeId, string>> {
  const client = new ApiClient(req.via, 10_000, {}, { token: req.token, tls: req.tls });
  try {
    for (;;) {
      try {
        const res = await client.call<{ nodes: { id: string; peerAddress: string }[] }>(
          'AdminService',
          'AddNode',
          { nodeId: req.nodeId, peerAddress: req.peerAddress, apiAddress: req.apiAddress },
          Math.max(1000, Math.min(10_000, req.deadlineMs - Date.now())),
        );
        return new Map(res.nodes.map((n) => [n.id, n.peerAddress]));
      } catch (err) {
        if (!isTransient(err) || Date.now() + RETRY_MS >= req.deadlineMs) throw err;
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  } finally {
    client.close();
  }
}

/** A restarted joined node re-asks once in the background; a failure is only logged. */
export function rejoinInBackground(req: JoinRequest, log: NodeLogger): void {
  joinCluster(req).then(
    () => log.info({ via: req.via }, 'join confirmed'),
    (err: unknown) => log.warn({ via: req.via, err: String(err) }, 'join not confirmed'),
  );
}
