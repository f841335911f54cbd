// Token buckets by key: a fresh key holds a whole bucket, a take is refused once it is empty with
// the wait until the next token, the bucket refills at its rate and never above its size, a
// changed limit applies at the next call, and prune() forgets only the buckets that are full
// again. Time is passed in as numbers.
import t from 'tap';
import { TokenBuckets } from '../../../src/base/token-buckets.js';

const limit = { rate: 10, burst: 5 };

t.test('a fresh key holds a whole bucket, and every key has its own', (t) => {
  const b = new TokenBuckets();
  t.equal(b.available('a', 0, limit), 5);
  t.equal(b.size, 0, 'asking does not make a bucket');
  for (let i = 0; i < 5; i++) t.equal(b.take('a', 0, limit), 0, `take ${i + 1} of 5`);
  t.equal(b.available('a', 0, limit), 0);
  t.equal(b.available('b', 0, limit), 5, 'another key is untouched');
  t.equal(b.take('b', 0, limit), 0);
  t.equal(b.size, 2);
  t.end();
});

t.test('an empty bucket refuses, with the wait in ms until a token (rounded up)', (t) => {
  const b = new TokenBuckets();
  for (let i = 0; i < 5; i++) b.take('a', 0, limit);
  t.equal(b.take('a', 0, limit), 100, '10 per second: one token every 100 ms');
  t.equal(b.take('a', 40, limit), 60, 'part of the way there');
  t.equal(b.take('a', 0, limit, 3), 300, 'three tokens take three times as long');
  t.equal(b.available('a', 40, limit), 0.4, 'a refused take took nothing');

  const third = { rate: 3, burst: 1 };
  t.equal(b.take('c', 0, third), 0);
  t.equal(b.take('c', 0, third), 334, '1000 / 3 = 333.3… is rounded up');
  t.equal(b.take('c', 333, third), 1, 'still a fraction of a ms short: 1, never 0');
  t.equal(b.take('c', 334, third), 0, 'the answer was enough');
  t.end();
});

t.test('refills at the rate, never above the bucket size', (t) => {
  const b = new TokenBuckets();
  for (let i = 0; i < 5; i++) b.take('a', 1000, limit);
  t.equal(b.available('a', 1100, limit), 1);
  t.equal(b.available('a', 1250, limit), 2.5, 'fractional while refilling');
  t.equal(b.available('a', 1500, limit), 5, 'full after burst / rate seconds');
  t.equal(b.available('a', 60_000, limit), 5, 'a long quiet spell does not bank more');
  t.equal(b.available('a', 900, limit), 0, 'a time before the last take adds nothing');
  // A bucket refilled part of the way serves what it holds, and refuses the rest.
  let taken = 0;
  while (b.take('a', 1300, limit) === 0) taken++;
  t.equal(taken, 3);
  t.end();
});

t.test('a cost above the bucket size can never be paid: Infinity', (t) => {
  const b = new TokenBuckets();
  t.equal(b.take('a', 0, limit, 6), Infinity);
  t.equal(b.available('a', 0, limit), 5, 'nothing taken');
  t.equal(b.take('a', 0, limit, 5), 0, 'the whole bucket at once is fine');
  t.equal(b.take('a', 0, limit, 6), Infinity, 'still Infinity when empty');
  t.end();
});

t.test('a changed limit applies at the next call', (t) => {
  const b = new TokenBuckets();
  const slow = { rate: 1, burst: 2 };
  const fast = { rate: 100, burst: 20 };
  b.take('a', 0, slow);
  b.take('a', 0, slow);
  t.equal(b.take('a', 0, slow), 1000, 'at 1 per second');
  t.equal(b.take('a', 0, fast), 10, 'at 100 per second');
  t.equal(b.available('a', 100, fast), 10, 'refills at the new rate');
  t.equal(b.available('a', 1000, fast), 20, 'up to the new size');
  t.equal(b.available('a', 1000, slow), 1, 'back to the old limit: its rate and size');
  t.equal(b.available('a', 60_000, slow), 2, 'the smaller size bounds the tokens');
  t.equal(b.available('fresh', 0, fast), 20, 'a fresh key holds the size it is asked with');
  t.end();
});

t.test('prune drops only the buckets that are full again', (t) => {
  const b = new TokenBuckets();
  const limits: Record<string, { rate: number; burst: number }> = {
    a: { rate: 10, burst: 5 },
    b: { rate: 1, burst: 5 },
  };
  const limitOf = (key: string): { rate: number; burst: number } => limits[key] ?? limit;
  b.take('a', 0, limitOf('a'), 5);
  b.take('b', 0, limitOf('b'), 5);
  t.equal(b.size, 2);
  b.prune(100, limitOf);
  t.equal(b.size, 2, 'neither is full yet');
  b.prune(500, limitOf);
  t.equal(b.size, 1, 'a refilled in 500 ms and is dropped');
  t.equal(b.available('a', 500, limitOf('a')), 5, 'a dropped bucket reads full');
  t.equal(b.available('b', 500, limitOf('b')), 0.5, 'b kept its tokens');
  b.prune(4999, limitOf);
  t.equal(b.size, 1);
  b.prune(5000, limitOf);
  t.equal(b.size, 0, 'b refilled in 5 s');

  // Full by a lowered size counts as full.
  b.take('b', 0, limitOf('b'), 3);
  b.prune(0, () => ({ rate: 1, burst: 2 }));
  t.equal(b.size, 0, '2 tokens left fill a bucket of 2');
  t.end();
});
