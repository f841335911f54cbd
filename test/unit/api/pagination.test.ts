// Page tokens and the cross-group merge (src/api/pagination.ts). Method: tokens round-trip and
// refuse other lists; the merge is checked against a naive oracle (sort everything, slice) over
// seeded random groups, walking every page until the token runs out, so a page boundary that
// skipped or repeated an item would show.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { SeededRand } from '../../../src/base/rand.js';
import {
  byId,
  compareDead,
  decodePageToken,
  encodePageToken,
  mergePages,
  pageAfter,
  pageSizeOf,
  PAGE_SIZE_DEFAULT,
  type DeadKey,
} from '../../../src/api/pagination.js';

t.test('a token round-trips its position and is refused by another list or scope', (t) => {
  const tok = encodePageToken('jobs', 'acme', 'job-17');
  t.equal(decodePageToken('jobs', 'acme', tok), 'job-17');
  t.equal(decodePageToken('jobs', 'acme', ''), undefined, 'empty token = first page');
  const fieldOf = (f: () => unknown): string | undefined => {
    try {
      f();
    } catch (err) {
      t.type(err, ValidationError);
      return (err as ValidationError).violations[0]?.field;
    }
    return undefined;
  };
  t.equal(
    fieldOf(() => decodePageToken('jobs', 'other', tok)),
    'pageToken',
    'other tenant',
  );
  t.equal(
    fieldOf(() => decodePageToken('dead', 'acme', tok)),
    'pageToken',
    'other list',
  );
  t.equal(
    fieldOf(() => decodePageToken('jobs', 'acme', 'not a token!')),
    'pageToken',
    'garbage',
  );
  t.equal(
    fieldOf(() => decodePageToken('jobs', 'acme', 'e30')),
    'pageToken',
    '{} is no token',
  );
  t.end();
});

t.test('page sizes: 0 means the default, above the maximum is refused', (t) => {
  t.equal(pageSizeOf(0), PAGE_SIZE_DEFAULT);
  t.equal(pageSizeOf(7), 7);
  t.throws(() => pageSizeOf(1001), ValidationError);
  t.throws(() => pageSizeOf(-1), ValidationError);
  t.end();
});

t.test('merged pages walk the union exactly once, in order (oracle, seeded)', (t) => {
  for (let seed = 1; seed <= 40; seed++) {
    const rand = new SeededRand(seed);
    const groups = 1 + rand.int(6);
    const ids = new Set<string>();
    const byGroup: { id: string }[][] = Array.from({ length: groups }, () => []);
    const n = rand.int(60);
    for (let i = 0; i < n; i++) {
      const id = `j${rand.int(1000)}`;
      if (ids.has(id)) continue;
      ids.add(id);
      byGroup[rand.int(groups)]!.push({ id });
    }
    for (const g of byGroup) g.sort(byId);
    const pageSize = 1 + rand.int(7);
    const seen: string[] = [];
    let after = '';
    for (let pages = 0; pages < 200; pages++) {
      const groupPages = byGroup.map((g) => pageAfter(g, (j) => j.id > after, pageSize));
      const merged = mergePages(groupPages, pageSize, byId);
      t.ok(merged.items.length <= pageSize);
      seen.push(...merged.items.map((j) => j.id));
      if (!merged.more) break;
      after = merged.items[merged.items.length - 1]!.id;
    }
    t.same(seen, [...ids].sort(), `seed ${seed}: every item once, in order`);
  }
  t.end();
});

t.test('the DLQ order is newest first, then by fire id', (t) => {
  const keys: DeadKey[] = [
    [5, 'b'],
    [9, 'a'],
    [5, 'a'],
  ];
  t.same(keys.sort(compareDead), [
    [9, 'a'],
    [5, 'a'],
    [5, 'b'],
  ]);
  t.end();
});
