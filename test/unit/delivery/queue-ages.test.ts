// The per-tenant age of the oldest queued delivery: items leave in any order (priorities,
// origins and caps decide, not age), and the oldest still queued is what counts; tenants with
// nothing queued drop out.
import t from 'tap';
import { QueueAges } from '../../../src/delivery/queue-ages.js';

const oldest = (q: QueueAges<string>): [string, number][] =>
  [...q.oldest()].map(([tenant, atMs]) => [tenant, atMs]);

t.test('the oldest queued item of each tenant, whatever order items leave in', (t) => {
  const q = new QueueAges<string>();
  q.queued('acme', 'a1', 100);
  q.queued('globex', 'g1', 150);
  q.queued('acme', 'a2', 200);
  q.queued('acme', 'a3', 300);
  t.same(oldest(q), [
    ['acme', 100],
    ['globex', 150],
  ]);
  q.left('acme', 'a2'); // a newer one starts first (a higher priority, say)
  t.same(oldest(q)[0], ['acme', 100], 'the oldest still waits');
  q.left('acme', 'a1');
  t.same(oldest(q)[0], ['acme', 300]);
  q.left('globex', 'g1');
  q.left('globex', 'unknown');
  t.same(oldest(q), [['acme', 300]], 'a tenant with nothing queued is gone');
  q.clear();
  t.same(oldest(q), []);
  t.end();
});
