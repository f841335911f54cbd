// The run output store (src/delivery/run-output-store.ts): each attempt's output kept up to its
// bound and marked truncated beyond it, the store within its total bound by evicting the
// attempts written to longest ago, reads by byte offset that continue where the last ended, and
// no cut (at the bound, at a read's size, at an offset) ever splits a UTF-8 sequence.
import t from 'tap';
import {
  outputExcerpt,
  RUN_OUTPUT_ENTRY_OVERHEAD_BYTES as OVERHEAD,
  RunOutputStore,
  utf8CutLength,
} from '../../../src/delivery/run-output-store.js';

const F = 'acme/job:1751333400000';

t.test('put keeps an output up to the bound, cut on a character boundary', (t) => {
  const s = new RunOutputStore({ maxBytes: 10, storeBytes: 10_000 });
  s.put(F, 1, 'hello');
  t.match(s.read(F, 1, 0), { text: 'hello', offset: 0, nextOffset: 5, totalBytes: 5 });
  t.match(s.read(F, 1, 0), { complete: true, truncated: false });
  // 'é' is 2 bytes: 'abcdefghi' + 'é' is 11 bytes; the bound 10 would split 'é'.
  s.put(F, 2, 'abcdefghié');
  t.match(s.read(F, 2, 0), { text: 'abcdefghi', totalBytes: 9, truncated: true });
  // A 4-byte character (U+1F600) at the bound: never half of it.
  s.put(F, 3, 'abcdefgh😀');
  t.match(s.read(F, 3, 0), { text: 'abcdefgh', totalBytes: 8, truncated: true });
  s.put(F, 4, '😀😀😀');
  t.match(s.read(F, 4, 0), { text: '😀😀', totalBytes: 8, truncated: true });
  // The caller cut it already (it read only the bound): truncated although it fits.
  s.put(F, 5, 'short', true);
  t.match(s.read(F, 5, 0), { text: 'short', truncated: true });
  t.equal(s.read(F, 6, 0), undefined, 'an attempt not held');
  t.equal(s.read('acme/other:1', 1, 0), undefined, 'another fire id');
  t.end();
});

t.test('a streamed output: open, append in parts, finish', (t) => {
  const s = new RunOutputStore({ maxBytes: 12, storeBytes: 10_000 });
  t.notOk(s.append(F, 1, 'early'), 'nothing is kept for an attempt not opened');
  t.notOk(s.has(F, 1));
  s.open(F, 1);
  t.match(s.read(F, 1, 0), { text: '', nextOffset: 0, complete: false, truncated: false });
  t.ok(s.append(F, 1, 'line 1\n'));
  const first = s.read(F, 1, 0)!;
  t.match(first, { text: 'line 1\n', nextOffset: 7, complete: false });
  t.ok(s.append(F, 1, 'line 2\n'), 'past the bound: accepted, cut');
  const next = s.read(F, 1, first.nextOffset)!;
  t.match(next, { text: 'line ', offset: 7, nextOffset: 12, truncated: true });
  t.ok(s.append(F, 1, 'more'), 'at the bound: accepted and dropped');
  t.match(s.read(F, 1, next.nextOffset), { text: '', nextOffset: 12 });
  s.finish(F, 1);
  t.match(s.read(F, 1, 0), { text: 'line 1\nline ', complete: true });
  t.notOk(s.append(F, 1, 'after'), 'a complete output takes nothing more');
  s.finish(F, 9);
  t.notOk(s.has(F, 9), 'finishing an attempt not held holds nothing');
  // A part whose bound falls inside a character: the character is left out whole.
  s.open(F, 2);
  s.append(F, 2, 'abcdefghij');
  s.append(F, 2, 'é€');
  t.match(s.read(F, 2, 0), { text: 'abcdefghijé', totalBytes: 12, truncated: true });
  t.end();
});

t.test('reads by offset continue where the last ended, never inside a character', (t) => {
  const s = new RunOutputStore({ maxBytes: 1000, storeBytes: 10_000 });
  const text = 'aé€😀b'.repeat(20); // 1 + 2 + 3 + 4 + 1 = 11 bytes each
  s.open(F, 1);
  for (const part of text.match(/.{1,7}/gu)!) s.append(F, 1, part);
  let offset = 0;
  let out = '';
  let reads = 0;
  for (;;) {
    const r = s.read(F, 1, offset, 5)!;
    if (r.text === '') break;
    t.ok(r.nextOffset - r.offset <= 5, 'within the read size');
    out += r.text;
    offset = r.nextOffset;
    reads++;
  }
  t.equal(out, text, 'reads of 5 bytes add up to the whole text');
  t.ok(reads > 40, `${reads} reads`);
  t.equal(offset, 220);
  // An offset inside a character ('é' is bytes 1-2, '€' bytes 3-5) reads from its start.
  t.match(s.read(F, 1, 2), { offset: 1 });
  t.match(s.read(F, 1, 4, 3), { offset: 3, text: '€', nextOffset: 6 });
  // A read size smaller than the character there still returns the whole character.
  t.match(s.read(F, 1, 6, 1), { text: '😀', offset: 6, nextOffset: 10 });
  // Past the end: nothing, and the end to continue from; negative: from the start.
  t.match(s.read(F, 1, 10_000), { text: '', offset: 220, nextOffset: 220 });
  t.match(s.read(F, 1, -5, 1), { offset: 0, text: 'a' });
  t.end();
});

t.test('the total bound evicts the attempts written to longest ago', (t) => {
  const store = 3 * (100 + OVERHEAD);
  const s = new RunOutputStore({ maxBytes: 100, storeBytes: store });
  const full = 'x'.repeat(100);
  s.put(F, 1, full);
  s.put(F, 2, full);
  s.open(F, 3);
  s.append(F, 3, full);
  t.equal(s.size, 3);
  t.equal(s.bytes, store, 'entries count their overhead');
  // Attempt 1 is written to again (reopened: a new stream), so 2 is now the oldest.
  s.open(F, 1);
  s.append(F, 1, 'y');
  s.put(F, 4, full);
  t.notOk(s.has(F, 2), 'the oldest write went first');
  t.ok(s.has(F, 1) && s.has(F, 3) && s.has(F, 4));
  t.equal(s.stats.evicted, 1);
  t.ok(s.bytes <= store, `within the bound (${s.bytes} of ${store})`);
  // An attempt evicted while it streamed takes no later part: its offsets would be wrong.
  s.open(F, 5);
  s.append(F, 5, 'a');
  s.put(F, 6, full);
  s.put(F, 7, full);
  s.put(F, 8, full);
  t.notOk(s.has(F, 5), 'evicted');
  t.notOk(s.append(F, 5, 'b'), 'a later part is refused');
  t.notOk(s.has(F, 5));
  // Replacing an attempt's output counts only the new one.
  const before = s.bytes;
  s.put(F, 8, 'short');
  t.equal(s.bytes, before - 95);
  // Empty outputs cost their overhead: many of them stay bounded too.
  const many = new RunOutputStore({ maxBytes: 100, storeBytes: 10 * OVERHEAD + 100 });
  for (let i = 0; i < 1000; i++) many.put(`acme/job:${i}`, 1, '');
  t.ok(many.size <= 10 && many.bytes <= 10 * OVERHEAD + 100, `${many.size} empty outputs held`);
  t.end();
});

t.test('capture off keeps nothing', (t) => {
  const s = new RunOutputStore({ maxBytes: 0, storeBytes: 0 });
  t.notOk(s.enabled);
  s.put(F, 1, 'x');
  s.open(F, 2);
  t.notOk(s.append(F, 2, 'x'));
  t.equal(s.size, 0);
  t.equal(s.bytes, 0);
  t.throws(
    () => new RunOutputStore({ maxBytes: 100, storeBytes: 100 }),
    'a store must hold one whole output',
  );
  t.end();
});

t.test('utf8CutLength and outputExcerpt never split a character', (t) => {
  const bytes = Buffer.from('a€😀', 'utf8'); // 1 + 3 + 4 bytes
  t.same(
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => utf8CutLength(bytes, n)),
    [0, 1, 1, 1, 4, 4, 4, 4, 8, 8],
  );
  t.equal(outputExcerpt('abc', 2), 'ab');
  t.equal(outputExcerpt('a😀', 2), 'a', 'a surrogate pair is kept whole or left out');
  t.equal(outputExcerpt('😀b', 2), '😀');
  t.equal(outputExcerpt('x'.repeat(2000)).length, 1024, 'the default is 1,024 characters');
  t.end();
});
