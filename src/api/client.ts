/**
 * A small promise client for the public API, for tickctl and the tests: one channel to one
 * endpoint, every call with a deadline, and errors decoded into ApiCallError (gRPC status, the
 * stable tickraft code, field violations from google.rpc.BadRequest, a retry hint).
 */
import * as grpc from '@grpc/grpc-js';
import type { FieldViolation } from '../base/errors.js';
import { loadApiServices, type PublicServiceName } from './proto.js';
import { decodeRpcStatus } from './rpc-status.js';

export const DEFAULT_CALL_TIMEOUT_MS = 10_000;

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

export class ApiClient {
  private readonly clients = new Map<PublicServiceName, grpc.Client>();

  constructor(
    readonly endpoint: string,
    private readonly timeoutMs = DEFAULT_CALL_TIMEOUT_MS,
    /** grpc-js channel options (the chaos driver turns transparent retries off). */
    private readonly channelOptions: grpc.ChannelOptions = {},
  ) {}

  call<T>(
    service: PublicServiceName,
    method: string,
    request: object,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const ctor = loadApiServices()[service];
    const def = ctor.service[method];
    if (!def) return Promise.reject(new Error(`${service} has no method ${method}`));
    let client = this.clients.get(service);
    if (!client) {
      client = new ctor(this.endpoint, grpc.credentials.createInsecure(), this.channelOptions);
      this.clients.set(service, client);
    }
    const c = client;
    return new Promise<T>((resolve, reject) => {
      c.makeUnaryRequest(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        request,
        new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, res) => {
          if (err) reject(ApiCallError.from(err));
          else resolve(res as T);
        },
      );
    });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
