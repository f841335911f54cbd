/**
 * A small promise client for the public API, for tickctl and the tests: one channel to one
 * endpoint, every call with a deadline, and errors decoded into ApiCallError (gRPC status, the
 * stable tickraft code, field violations from google.rpc.BadRequest, a retry hint).
 */
import * as grpc from '@grpc/grpc-js';
import { AUTHORIZATION_METADATA, bearerHeader } from '../auth/token-secret.js';
import type { FieldViolation } from '../base/errors.js';
import { clientCredentials, type ClientTlsOptions } from '../transport/tls.js';
import { clientServices } from './client-proto.js';
import type { PublicServiceName } from './proto-options.js';
import { decodeRpcStatus } from './rpc-status.js';

export const DEFAULT_CALL_TIMEOUT_MS = 10_000;

export type { ClientTlsOptions } from '../transport/tls.js';

export class ApiCallError extends Error {
  override readonly name = 'ApiCallError';

  constructor(
    /** The gRPC status code. */
    readonly status: grpc.status,
    /** The stable tickraft error code (`tickraft-error-code`), or the status name. */
    readonly code: string,
    message: string,
    readonly violations: readonly FieldViolation[],
    readonly retryDelayMs: number | undefined,
    readonly leaderHint: string | undefined,
  ) {
    super(message);
  }

  static from(err: grpc.ServiceError): ApiCallError {
    const md = err.metadata ?? new grpc.Metadata();
    const first = (key: string): string | undefined => {
      const v = md.get(key)[0];
      return typeof v === 'string' ? v : undefined;
    };
    let violations: readonly FieldViolation[] = [];
    let retryDelayMs: number | undefined;
    const details = md.get('grpc-status-details-bin')[0];
    if (details instanceof Buffer) {
      try {
        const st = decodeRpcStatus(details);
        violations = st.violations;
        retryDelayMs = st.retryDelayMs;
      } catch {
        // Details we cannot read leave the status and message, which still say what failed.
      }
    }
    return new ApiCallError(
      err.code,
      first('tickraft-error-code') ?? grpc.status[err.code] ?? 'UNKNOWN',
      err.details || err.message,
      violations,
      retryDelayMs,
      first('tickraft-leader'),
    );
  }
}

/** Call metadata carrying `token` as a bearer token; empty when there is none. */
export function bearerMetadata(token: string | undefined): grpc.Metadata {
  const md = new grpc.Metadata();
  if (token !== undefined) md.set(AUTHORIZATION_METADATA, bearerHeader(token));
  return md;
}

export interface ApiClientOptions {
  /** The bearer token every call sends (`authorization: Bearer <token>`); none when absent. */
  readonly token?: string | undefined;
  /**
   * TLS, for a cluster started with `--tls-cert`: the CA that signed the nodes' API
   * certificates (the system's roots when absent), and a client certificate and key when the
   * cluster requires them (`--tls-client-ca`). Plaintext when absent. A certificate without
   * its key (or the reverse) throws a TlsOptionsError naming the field.
   */
  readonly tls?: ClientTlsOptions | undefined;
}

export class ApiClient {
  private readonly clients = new Map<PublicServiceName, grpc.Client>();
  private readonly endpoints: readonly string[];
  private current = 0;
  /** With several endpoints: the connection to one of them, made before the first call. */
  private connected: Promise<void> | undefined;
  private readonly credentials: grpc.ChannelCredentials;

  constructor(
    /**
     * A node's client API address, or several: then the first that accepts a connection serves
     * every call of this client (a node that refuses or cannot be reached is skipped). Only the
     * connection is failed over, never a call, so no request can be applied twice.
     */
    endpoints: string | readonly string[],
    private readonly timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
    /** grpc-js channel options (the chaos driver turns transparent retries off). */
    private readonly channelOptions: grpc.ChannelOptions = {},
    /** The bearer token and TLS settings (none: no token, plaintext). */
    private readonly options: ApiClientOptions = {},
  ) {
    this.endpoints = typeof endpoints === 'string' ? [endpoints] : [...endpoints];
    if (this.endpoints.length === 0) throw new Error('ApiClient needs at least one endpoint');
    this.credentials = clientCredentials(options.tls);
  }

  /** The endpoint calls go to (after a failover, the one that answered). */
  get endpoint(): string {
    return this.endpoints[this.current]!;
  }

  /** Every endpoint this client was given, in the order they are tried. */
  get allEndpoints(): readonly string[] {
    return this.endpoints;
  }

  async call<T>(
    service: PublicServiceName,
    method: string,
    request: object,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const ctor = clientServices()[service];
    const def = ctor.service[method];
    if (!def) throw new Error(`${service} has no method ${method}`);
    if (this.endpoints.length > 1) {
      this.connected ??= this.connectToOne(service, Date.now() + timeoutMs);
      await this.connected;
    }
    let client = this.clients.get(service);
    if (!client) {
      client = new ctor(this.endpoint, this.credentials, this.channelOptions);
      this.clients.set(service, client);
    }
    const c = client;
    return new Promise<T>((resolve, reject) => {
      c.makeUnaryRequest(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        request,
        this.metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, res) => {
          if (err) reject(ApiCallError.from(err));
          else resolve(res as T);
        },
      );
    });
  }

  /**
   * A server stream (RunService.WatchRuns): `onMessage` for each message; resolves when the
   * server ends it, rejects with an ApiCallError when it fails. No deadline: the stream lasts
   * until it ends or `signal` aborts it (then it resolves).
   */
  async stream<T>(
    service: PublicServiceName,
    method: string,
    request: object,
    onMessage: (message: T) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    const ctor = clientServices()[service];
    const def = ctor.service[method];
    if (!def) throw new Error(`${service} has no method ${method}`);
    if (this.endpoints.length > 1) {
      this.connected ??= this.connectToOne(service, Date.now() + this.timeoutMs);
      await this.connected;
    }
    let client = this.clients.get(service);
    if (!client) {
      client = new ctor(this.endpoint, this.credentials, this.channelOptions);
      this.clients.set(service, client);
    }
    const call = client.makeServerStreamRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      request,
      this.metadata(),
      {},
    );
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => call.cancel();
      signal?.addEventListener('abort', onAbort, { once: true });
      call.on('data', (m: T) => onMessage(m));
      call.on('error', (err: grpc.ServiceError) => {
        signal?.removeEventListener('abort', onAbort);
        if (signal?.aborted === true && err.code === grpc.status.CANCELLED) resolve();
        else reject(ApiCallError.from(err));
      });
      call.on('status', (s: grpc.StatusObject) => {
        if (s.code !== grpc.status.OK) return;
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  /** The metadata every call carries: the bearer token, when this client has one. */
  metadata(): grpc.Metadata {
    return bearerMetadata(this.options.token);
  }

  /**
   * Tries the endpoints in order until one's channel is READY; one that fails to connect
   * (refused, unreachable, no answer within its share of the deadline) passes to the next. When
   * none connects, the error is the UNAVAILABLE a call to the last one would have had, naming all.
   */
  private async connectToOne(service: PublicServiceName, deadline: number): Promise<void> {
    const ctor = clientServices()[service];
    const failures: string[] = [];
    for (let i = 0; i < this.endpoints.length; i++) {
      const left = this.endpoints.length - i;
      const until = Date.now() + Math.max(1, (deadline - Date.now()) / left);
      const endpoint = this.endpoints[i]!;
      const probe = new ctor(endpoint, this.credentials, this.channelOptions);
      try {
        await channelReady(probe.getChannel(), until);
        this.current = i;
        this.clients.set(service, probe);
        return;
      } catch (err) {
        probe.close();
        failures.push(`${endpoint}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    throw new ApiCallError(
      grpc.status.UNAVAILABLE,
      'UNAVAILABLE',
      `no endpoint accepted a connection (${failures.join('; ')})`,
      [],
      undefined,
      undefined,
    );
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

/** Resolves once `channel` is READY; rejects at its first TRANSIENT_FAILURE or at `deadline`. */
function channelReady(channel: grpc.ChannelInterface, deadline: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const state = channel.getConnectivityState(true);
      if (state === grpc.connectivityState.READY) return resolve();
      if (state === grpc.connectivityState.TRANSIENT_FAILURE)
        return reject(new Error('connection failed'));
      if (state === grpc.connectivityState.SHUTDOWN) return reject(new Error('channel closed'));
      channel.watchConnectivityState(state, deadline, (err) => {
        if (err) reject(new Error('no connection within the deadline'));
        else check();
      });
    };
    check();
  });
}
