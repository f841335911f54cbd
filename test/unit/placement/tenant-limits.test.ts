// nodeShareOf: a node's part of a tenant's cluster-wide limit (in flight, fires per second) by
// the data groups it leads. The whole limit when it leads them all (or when there are no groups
// to split over), otherwise its share rounded up and never below 1, so that the shares of the
// nodes together never fall short of the limit.
import t from 'tap';
import { nodeShareOf } from '../../../src/placement/tenant-limits.js';

t.test('the whole limit when the node leads every group, or there are none', (t) => {
  t.equal(nodeShareOf(100, 8, 8), 100, 'leads all 8');
  t.equal(nodeShareOf(1, 3, 3), 1);
  t.equal(nodeShareOf(100, 0, 0), 100, 'no groups yet');
  t.equal(nodeShareOf(100, 2, 0), 100, 'no groups, whatever it is said to lead');
  t.end();
});

t.test('the share of the groups it leads, rounded up', (t) => {
  t.equal(nodeShareOf(100, 2, 8), 25, 'an exact share');
  t.equal(nodeShareOf(100, 1, 3), 34, '33.3… rounded up');
  t.equal(nodeShareOf(100, 2, 3), 67, '66.6… rounded up');
  t.equal(nodeShareOf(10, 7, 8), 9, '8.75 rounded up');
  t.end();
});

t.test('never below 1', (t) => {
  t.equal(nodeShareOf(1, 1, 8), 1, 'an eighth of 1');
  t.equal(nodeShareOf(5, 1, 100), 1, 'a twentieth');
  t.equal(nodeShareOf(5, 0, 8), 1, 'a node that leads no group');
  t.end();
});

t.test('the shares of the nodes together cover the limit', (t) => {
  let short = 0;
  let first = '';
  for (const limit of [1, 2, 3, 5, 7, 10, 99, 100, 1000, 50_000])
    for (let groups = 1; groups <= 24; groups++)
      for (let nodes = 1; nodes <= Math.min(groups, 6); nodes++) {
        // The groups dealt over the nodes as evenly as they go, then all on the first node.
        const even = Array.from(
          { length: nodes },
          (_, i) => Math.floor(groups / nodes) + (i < groups % nodes ? 1 : 0),
        );
        const lopsided = [groups - (nodes - 1), ...Array<number>(nodes - 1).fill(1)];
        for (const split of [even, lopsided]) {
          const sum = split.reduce((s, led) => s + nodeShareOf(limit, led, groups), 0);
          if (sum < limit) {
            short++;
            first ||= `limit ${limit}, groups ${groups} led as ${split.join('+')}: ${sum}`;
          }
        }
      }
  t.equal(short, 0, first || 'every split covers its limit');
  t.end();
});
