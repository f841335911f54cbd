/**
 * The HTTP API's way into the node: a gRPC client of the node's own client API (`--listen`),
 * over loopback, with the caller's `Authorization` header as the call's `authorization`
 * metadata. Every HTTP request is thereby an ordinary call of the public API, checked by the same
 * guard, validated by the same handlers, scoped to the same tenant and forwarded to the same
 * group leaders: there is no second implementation to keep in step. Nothing else of the HTTP
 * request reaches the call (no other header becomes metadata), so an HTTP client can do exactly
 * what a gRPC client with the same token can.
 *
 * With TLS the node dials itself as it dials other nodes (its --tls-cert as the client
 * certificate, which --tls-client-ca signs: tls-files.ts checks that at start).
 */
import * as grpc from '@grpc/grpc-js';
import { clientServices } from '../api/client-proto.js';
import type { PublicServiceName } from '../api/proto-options.js';
import { AUTHORIZATION_METADATA } from '../auth/token-secret.js';
import { HttpApiError } from './http-errors.js';
import type { Msg } from './json-request.js';

/** The bound on a unary call: as long as a forwarded call may take (src/api/router.ts). */
export const CALL_TIMEOUT_MS = 30_000;

/**
 * The address the node's own client API is dialled at: its --listen host, or loopback when that
 * is a wildcard (which a listener understands and a client cannot dial).
 */
export function loopbackAddress(listenHost: string, port: number): string {
  if (listenHost === '0.0.0.0') return `127.0.0.1:${port}`;
  if (/^\[[0:]*\]$/.test(listenHost)) return `[::1]:${port}`;
  return `${listenHost}:${port}`;
}

export class GrpcLoopback {
  private readonly client: grpc.Client;

  constructor(address: string, credentials: grpc.ChannelCredentials | undefined) {
    this.client = new grpc.Client(address, credentials ?? grpc.credentials.createInsecure(), {
      'grpc.enable_channelz': 0,
      // A page of jobs can exceed grpc-js' default of 4 MiB (1000 jobs with large payloads);
      // the server sent it, so it is taken whole, as an HTTP response carries it.
      'grpc.max_receive_message_length': -1,
    });
  }

  private definition(service: PublicServiceName, rpc: string): grpc.MethodDefinition<Msg, Msg> {
    const def = clientServices()[service].service[rpc];
    // The route table names only RPCs of the proto (test/unit/http/routes.test.ts).
    if (!def) throw new Error(`${service} has no method ${rpc}`);
    return def as grpc.MethodDefinition<Msg, Msg>;
  }

  /** Call metadata: the caller's Authorization header, and nothing else. */
  private metadata(authorization: string | undefined): grpc.Metadata {
    const md = new grpc.Metadata();
    if (authorization === undefined) return md;
    try {
      md.set(AUTHORIZATION_METADATA, authorization);
    } catch {
      // grpc-js refuses values outside printable ASCII; no token holds such characters.
      throw new HttpApiError(
        401,
        grpc.status.UNAUTHENTICATED,
        'AUTH_MALFORMED',
        'the Authorization header must be "Bearer <token>" in printable ASCII',
      );
    }
    return md;
  }

  /**
   * One unary call. Rejects with the grpc.ServiceError the API answered; `signal` cancels the
   * call (the HTTP client went away).
   */
  unary(
    service: PublicServiceName,
    rpc: string,
    request: Msg,
    authorization: string | undefined,
    signal: AbortSignal,
  ): Promise<Msg> {
    const def = this.definition(service, rpc);
    const md = this.metadata(authorization);
    return new Promise<Msg>((resolve, reject) => {
      const call = this.client.makeUnaryRequest(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        request,
        md,
        { deadline: Date.now() + CALL_TIMEOUT_MS },
        (err, res) => {
          signal.removeEventListener('abort', cancel);
          if (err) reject(err);
          else resolve(res ?? {});
        },
      );
      // A declaration, hoisted: the callback above may name it before this line runs.
      function cancel(): void {
        call.cancel();
      }
      signal.addEventListener('abort', cancel, { once: true });
    });
  }

  /** A server stream (RunService.WatchRuns), without a deadline: it lasts until either end stops. */
  serverStream(
    service: PublicServiceName,
    rpc: string,
    request: Msg,
    authorization: string | undefined,
  ): grpc.ClientReadableStream<Msg> {
    const def = this.definition(service, rpc);
    return this.client.makeServerStreamRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      request,
      this.metadata(authorization),
      {},
    );
  }

  close(): void {
    this.client.close();
  }
}
