// Tracing against a real OTLP/HTTP receiver on loopback: spans arrive as JSON at /v1/traces
// with the ids an attempt's traceparent names, their events and attributes; off, nothing at all.
import t from 'tap';
import { otlpCollector } from '../../helpers/otlp-collector.js';
import {
  attemptIds,
  NO_TRACING,
  startTracing,
  traceparentOf,
} from '../../../src/observe/tracing.js';

type Obj = Record<string, unknown>;

t.test(
  'an attempt span: deterministic ids, its events, ended when its result commits',
  async (t) => {
    const c = await otlpCollector(t);
    const tracing = await startTracing(c.url, 'n1');
    const fireId = 'acme/report:1751333400000';
    const header = tracing.traceparentOf(fireId, 2);
    const ids = attemptIds(fireId, 2);
    t.equal(header, `00-${ids.traceId}-${ids.spanId}-01`, 'W3C traceparent, version 00, sampled');
    t.equal(
      traceparentOf(fireId, 1).slice(3, 35),
      ids.traceId,
      'every attempt of a run: one trace',
    );
    t.not(traceparentOf(fireId, 1), header, 'each attempt its own span');
    tracing.attemptHandedOut({
      fireId,
      attempt: 2,
      tenant: 'acme',
      jobId: 'report',
      token: 1677721603,
      groupId: 3,
      startMs: 1751333399000,
      slotMs: 1751333400000,
      handedOutMs: 1751333400005,
    });
    tracing.attemptAnswered(fireId, 2, 1751333400050, 'retry', 503);
    tracing.attemptCommitted(fireId, 2, 1751333400060);
    const done = tracing.apiCall('JobService.CreateJob');
    done('INVALID_ARGUMENT');
    await tracing.shutdown();
    const fire = c.spans.find((s) => s['name'] === 'tickraft.fire');
    t.ok(fire, 'the attempt span arrived');
    t.equal(fire?.['traceId'], ids.traceId);
    t.equal(fire?.['spanId'], ids.spanId, 'with the span id its request carried');
    t.same(
      (fire?.['events'] as Obj[]).map((e) => e['name']),
      ['due', 'handed out', 'answered', 'result committed'],
    );
    t.equal(String(fire?.['startTimeUnixNano']), '1751333399000000000', 'from the intent');
    t.equal(String(fire?.['endTimeUnixNano']), '1751333400060000000', 'to the committed result');
    const attr = (s: Obj | undefined, key: string): unknown =>
      (s?.['attributes'] as { key: string; value: Obj }[]).find((a) => a.key === key)?.value;
    t.same(attr(fire, 'tickraft.fire_id'), { stringValue: fireId });
    t.same(attr(fire, 'http.response.status_code'), { intValue: 503 });
    const call = c.spans.find((s) => s['name'] === 'JobService.CreateJob');
    t.same(attr(call, 'rpc.grpc.status_code'), { stringValue: 'INVALID_ARGUMENT' });
  },
);

t.test('off: no header, no span, nothing loaded', (t) => {
  t.equal(NO_TRACING.enabled, false);
  t.equal(NO_TRACING.traceparentOf('acme/x:1', 1), undefined);
  t.end();
});
