// A first end-to-end check of the core through the harness: three voters elect a leader,
// replicate and commit a proposal, and every node applies the same entries in the same order.
import t from 'tap';
import { Network } from './harness.js';

t.test('three nodes elect, replicate and apply', (t) => {
  const net = new Network({ voters: ['n1', 'n2', 'n3'] });
  net.tickAll(12);
  t.ok(net.leader() !== undefined, 'a leader was elected');
  const lead = net.leader()!;
  const r = net.propose(lead, 'hello');
  t.ok(r.ok, 'proposal accepted');
  net.stabilize();
  for (const id of ['n1', 'n2', 'n3']) t.same(net.appliedTexts(id), ['hello'], `${id} applied`);
  t.end();
});
