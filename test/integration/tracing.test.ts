// Tracing on real nodes (--otlp-endpoint): every node exports its spans over OTLP/HTTP to a
// receiver on loopback. A fire's webhook request carries a traceparent naming the span of its
// attempt, and that span arrives with the run's fire id, ended once the result committed; API
// calls have spans too. A node without the flag sends no traceparent (the other tests' sinks).
import t from 'tap';
import { otlpCollector } from '../helpers/otlp-collector.js';
import { ApiCluster, TENANT } from '../helpers/api-cluster.js';
import { eventually } from '../helpers/cluster.js';

type Obj = Record<string, unknown>;

t.test('a fire is traced from its intent to its committed result', async (t) => {
  const { url: endpoint, spans } = await otlpCollector(t);
  const ac = await ApiCluster.start(t, { groups: 2, extraArgs: ['--otlp-endpoint', endpoint] });
  const c = ac.client('n1');
  await c.call('JobService', 'CreateJob', {
    jobId: 'traced',
    spec: ac.spec({ schedule: 'every 1h' }),
  });
  const res = await c.call<Obj>('JobService', 'TriggerJob', { tenant: TENANT, jobId: 'traced' });
  const fireId = String((res['run'] as Obj)['fireId']);
  await eventually(
    () =>
      ac.sink.receipts.some((r) => r.fireId === fireId)
        ? Promise.resolve()
        : Promise.reject(new Error('not received yet')),
    15_000,
  );
  const header = ac.sink.receipts.find((r) => r.fireId === fireId)!.headers['traceparent'];
  t.match(header, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/, 'the webhook request carries a traceparent');
  const [, traceId, spanId] = String(header).split('-');
  const attr = (s: Obj, key: string): unknown =>
    (s['attributes'] as { key: string; value: Obj }[]).find((a) => a.key === key)?.value;
  await eventually(
    () =>
      spans.some((s) => s['spanId'] === spanId)
        ? Promise.resolve()
        : Promise.reject(new Error('the attempt span has not arrived')),
    15_000,
  );
  const fire = spans.find((s) => s['spanId'] === spanId)!;
  t.equal(fire['name'], 'tickraft.fire');
  t.equal(fire['traceId'], traceId, 'the span the request named');
  t.same(attr(fire, 'tickraft.fire_id'), { stringValue: fireId });
  t.same(
    (fire['events'] as Obj[]).map((e) => e['name']),
    ['due', 'handed out', 'answered', 'result committed'],
    'intent → due → sent → answered → result committed',
  );
  await eventually(
    () =>
      spans.some((s) => s['name'] === 'JobService.TriggerJob')
        ? Promise.resolve()
        : Promise.reject(new Error('no API span yet')),
    15_000,
  );
  t.pass('API calls are traced');
});
