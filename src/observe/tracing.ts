/**
 * OpenTelemetry traces (`--otlp-endpoint`): one span per API call, and one per delivery attempt
 * of a run, from the moment its fire intent committed (the run's creation) or its retry was
 * handed out, with events when it came due, was handed to delivery and was answered, ended when
 * its result committed. The webhook request carries the attempt span's context as a W3C
 * `traceparent` header, so a receiver's own spans join the trace.
 *
 * Off (no endpoint) it costs nothing: NO_TRACING does nothing, and the OpenTelemetry SDK is not
 * even loaded (startTracing imports it only when asked). On, spans leave in batches over
 * OTLP/HTTP (JSON) every half second.
 *
 * An attempt's ids are derived from its fire id and attempt number (sha-256), not drawn at
 * random: the request can be rendered, and its `traceparent` written, before its span exists
 * (requests are built ahead of their slot), and every attempt of a run lands in one trace.
 */
import { createHash } from 'node:crypto';
import type { Span, Tracer } from '@opentelemetry/api';

/** What the node's parts call; NO_TRACING when tracing is off. */
export interface Tracing {
  readonly enabled: boolean;
  /** The `traceparent` of an attempt's span; undefined when tracing is off. */
  traceparentOf(fireId: string, attempt: number): string | undefined;
  /** Starts an attempt's span (see the module comment); ended by attemptCommitted. */
  attemptHandedOut(a: AttemptSpanStart): void;
  /** The attempt's answer (or failure) came. */
  attemptAnswered(
    fireId: string,
    attempt: number,
    atMs: number,
    outcome: string,
    status: number | undefined,
  ): void;
  /** The attempt's result is committed: its span ends. */
  attemptCommitted(fireId: string, attempt: number, atMs: number): void;
  /** A span for one API call; call the returned function with the call's gRPC status name. */
  apiCall(method: string): (status: string) => void;
  /** Exports what is left and stops. */
  shutdown(): Promise<void>;
}

export interface AttemptSpanStart {
  readonly fireId: string;
  readonly attempt: number;
  readonly tenant: string;
  readonly jobId: string;
  readonly token: number;
  readonly groupId: number;
  /** When the run's intent committed (first attempts) or now (a retry). */
  readonly startMs: number;
  readonly slotMs: number;
  readonly handedOutMs: number;
}

const NOTHING = (): void => {};

export const NO_TRACING: Tracing = {
  enabled: false,
  traceparentOf: () => undefined,
  attemptHandedOut: NOTHING,
  attemptAnswered: NOTHING,
  attemptCommitted: NOTHING,
  apiCall: () => NOTHING,
  shutdown: () => Promise.resolve(),
};

/** Attempt spans open at once at most: past it the oldest is ended (its result never came). */
const OPEN_SPANS_MAX = 100_000;

/** The trace id (32 hex) of a run and the span id (16 hex) of one of its attempts. */
export function attemptIds(fireId: string, attempt: number): { traceId: string; spanId: string } {
  const traceId = createHash('sha256').update(fireId).digest('hex').slice(0, 32);
  const spanId = createHash('sha256').update(`${fireId}#${attempt}`).digest('hex').slice(0, 16);
  return { traceId, spanId };
}

/** The W3C trace context header of an attempt (version 00, sampled). */
export function traceparentOf(fireId: string, attempt: number): string {
  const { traceId, spanId } = attemptIds(fireId, attempt);
  return `00-${traceId}-${spanId}-01`;
}

/**
 * Tracing exported to `endpoint` (the collector's base URL, e.g. http://127.0.0.1:4318: spans go
 * to `<endpoint>/v1/traces`), as node `nodeId`.
 */
export async function startTracing(endpoint: string, nodeId: string): Promise<Tracing> {
  const [api, sdk, exporterModule, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  // The next root span's ids, set just before an attempt's span starts (see the module comment).
  let nextIds: { traceId: string; spanId: string } | undefined;
  const random = new sdk.RandomIdGenerator();
  const idGenerator = {
    generateTraceId: (): string => nextIds?.traceId ?? random.generateTraceId(),
    generateSpanId: (): string => nextIds?.spanId ?? random.generateSpanId(),
  };
  const exporter = new exporterModule.OTLPTraceExporter({
    url: `${endpoint.replace(/\/+$/, '')}/v1/traces`,
  });
  const provider = new sdk.BasicTracerProvider({
    resource: resources.resourceFromAttributes({
      'service.name': 'tickraft',
      'service.instance.id': nodeId,
    }),
    idGenerator,
    spanProcessors: [new sdk.BatchSpanProcessor(exporter, { scheduledDelayMillis: 500 })],
  });
  const tracer: Tracer = provider.getTracer('tickraft');
  const open = new Map<string, Span>();
  const keyOf = (fireId: string, attempt: number): string => `${fireId}#${attempt}`;
  return {
    enabled: true,
    traceparentOf,
    attemptHandedOut(a) {
      nextIds = attemptIds(a.fireId, a.attempt);
      let span: Span;
      try {
        span = tracer.startSpan('tickraft.fire', {
          kind: api.SpanKind.PRODUCER,
          startTime: Math.min(a.startMs, a.handedOutMs),
          attributes: {
            'tickraft.fire_id': a.fireId,
            'tickraft.tenant': a.tenant,
            'tickraft.job_id': a.jobId,
            'tickraft.attempt': a.attempt,
            'tickraft.fencing_token': a.token,
            'tickraft.group': a.groupId,
          },
        });
      } finally {
        nextIds = undefined;
      }
      span.addEvent('due', a.slotMs);
      span.addEvent('handed out', a.handedOutMs);
      const key = keyOf(a.fireId, a.attempt);
      open.get(key)?.end(a.handedOutMs);
      open.set(key, span);
      if (open.size > OPEN_SPANS_MAX) {
        const [oldestKey, oldest] = open.entries().next().value as [string, Span];
        oldest.end();
        open.delete(oldestKey);
      }
    },
    attemptAnswered(fireId, attempt, atMs, outcome, status) {
      const span = open.get(keyOf(fireId, attempt));
      if (span === undefined) return;
      span.addEvent('answered', { outcome, ...(status !== undefined && { status }) }, atMs);
      span.setAttribute('tickraft.outcome', outcome);
      if (status !== undefined) span.setAttribute('http.response.status_code', status);
      if (outcome !== 'success')
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: outcome });
    },
    attemptCommitted(fireId, attempt, atMs) {
      const key = keyOf(fireId, attempt);
      const span = open.get(key);
      if (span === undefined) return;
      span.addEvent('result committed', atMs);
      span.end(atMs);
      open.delete(key);
    },
    apiCall(method) {
      const [service, name] = method.split('.');
      const span = tracer.startSpan(method, {
        kind: api.SpanKind.SERVER,
        attributes: {
          'rpc.system': 'grpc',
          'rpc.service': `tickraft.v1.${service ?? ''}`,
          'rpc.method': name ?? method,
        },
      });
      return (status) => {
        span.setAttribute('rpc.grpc.status_code', status);
        if (status !== 'OK') span.setStatus({ code: api.SpanStatusCode.ERROR, message: status });
        span.end();
      };
    },
    async shutdown() {
      for (const span of open.values()) span.end();
      open.clear();
      await provider.shutdown();
    },
  };
}
