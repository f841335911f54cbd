// The partition shapes as directed cuts: for each shape, who hears whom, checked against the
// property that defines it (halves split in two, isolate leaves one node alone, every node of a
// majorities ring hears a distinct majority, a bridge node hears everyone, one-way is one
// direction only).
import t from 'tap';
import {
  bridge,
  halves,
  hearing,
  isolate,
  majoritiesRing,
  oneWay,
  type Cut,
} from '../../chaos/partitions.js';

const three = ['n1', 'n2', 'n3'];
const five = ['n1', 'n2', 'n3', 'n4', 'n5'];

function heard(nodes: string[], cuts: Cut[]): Record<string, string[]> {
  return Object.fromEntries([...hearing(nodes, cuts)].map(([n, s]) => [n, [...s].sort()]));
}

t.test('halves: the smaller half first, both directions cut', (t) => {
  t.same(heard(five, halves(five)), {
    n1: ['n2'],
    n2: ['n1'],
    n3: ['n4', 'n5'],
    n4: ['n3', 'n5'],
    n5: ['n3', 'n4'],
  });
  t.end();
});

t.test('isolate: one node hears nobody and nobody hears it', (t) => {
  t.same(heard(three, isolate(three, 'n2')), { n1: ['n3'], n2: [], n3: ['n1'] });
  t.end();
});

t.test('majorities ring: every node hears a majority, no two the same', (t) => {
  for (const nodes of [three, five]) {
    const h = hearing(nodes, majoritiesRing(nodes));
    const majorities = new Set<string>();
    for (const [node, peers] of h) {
      const seen = [node, ...peers].sort();
      t.equal(seen.length, Math.floor(nodes.length / 2) + 1, `${node} sees a bare majority`);
      majorities.add(seen.join(','));
    }
    t.equal(majorities.size, nodes.length, `${nodes.length} nodes: all majorities distinct`);
  }
  t.same(heard(five, majoritiesRing(five)).n1, ['n2', 'n5'], 'with 5 nodes, i hears i±1');
  t.end();
});

t.test('bridge: two halves apart, the bridge hears and is heard by all', (t) => {
  t.same(heard(five, bridge(five)), {
    n1: ['n2', 'n3'],
    n2: ['n1', 'n3'],
    n3: ['n1', 'n2', 'n4', 'n5'],
    n4: ['n3', 'n5'],
    n5: ['n3', 'n4'],
  });
  t.end();
});

t.test('one-way: only from → to is cut', (t) => {
  t.same(heard(three, oneWay('n1', 'n2')), { n1: ['n2', 'n3'], n2: ['n3'], n3: ['n1', 'n2'] });
  t.end();
});
