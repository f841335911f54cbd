// Job targets of the form `worker:<pool>[?tags=a,b]`: a valid URL names a pool and a sorted set
// of tags; every invalid one comes back as a reason string that says what is wrong, and
// workerTargetViolations turns those into field violations (also refusing headers, as a worker
// target sends no HTTP request).
import t, { type Test } from 'tap';
import {
  isWorkerUrl,
  offersAll,
  parseWorkerUrl,
  WORKER_TAGS_MAX,
  workerTargetViolations,
} from '../../../src/delivery/worker-target.js';

/** The reason `url` is refused; fails the test (and returns '') when it is accepted. */
function reasonOf(t: Test, url: string): string {
  const r = parseWorkerUrl(url);
  if (typeof r !== 'string') {
    t.fail(`${url} should be refused, got ${JSON.stringify(r)}`);
    return '';
  }
  return r;
}

const tagList = (n: number): string => Array.from({ length: n }, (_, i) => `t${i}`).join(',');

t.test('isWorkerUrl tells the scheme apart', (t) => {
  t.equal(isWorkerUrl('worker:render'), true);
  t.equal(isWorkerUrl('https://example.com/hook'), false);
  t.equal(isWorkerUrl('workers:render'), false);
  t.end();
});

t.test('a pool alone: no tags', (t) => {
  t.strictSame(parseWorkerUrl('worker:render'), { pool: 'render', tags: [] });
  t.strictSame(parseWorkerUrl('worker:0-a.b_c'), { pool: '0-a.b_c', tags: [] });
  const longest = 'p'.repeat(64);
  t.strictSame(parseWorkerUrl(`worker:${longest}`), { pool: longest, tags: [] }, '64 is allowed');
  t.end();
});

t.test('tags come back sorted', (t) => {
  t.strictSame(parseWorkerUrl('worker:render?tags=gpu'), { pool: 'render', tags: ['gpu'] });
  t.strictSame(parseWorkerUrl('worker:render?tags=ssd,gpu,a100'), {
    pool: 'render',
    tags: ['a100', 'gpu', 'ssd'],
  });
  const most = parseWorkerUrl(`worker:p?tags=${tagList(WORKER_TAGS_MAX)}`);
  t.equal(typeof most === 'string' ? most : most.tags.length, WORKER_TAGS_MAX, '16 tags pass');
  // Asked again (memoised): the same answer.
  t.strictSame(parseWorkerUrl('worker:render?tags=ssd,gpu,a100'), {
    pool: 'render',
    tags: ['a100', 'gpu', 'ssd'],
  });
  t.end();
});

t.test('a bad pool name is refused, saying what a pool may be', (t) => {
  for (const url of [
    'worker:',
    'worker:Render',
    'worker:ren der',
    'worker:ren/der',
    'worker:-render',
    'worker:.render',
    'worker:?tags=gpu',
  ]) {
    const reason = reasonOf(t, url);
    t.match(reason, /worker pool "[^"]*" must be 1-64 characters of a-z, 0-9/, url);
  }
  t.match(reasonOf(t, 'worker:Render'), /"Render"/, 'the reason quotes the pool');
  t.match(reasonOf(t, 'worker:'), /pool ""/, 'an empty pool is named as empty');
  t.end();
});

t.test('a pool longer than 64 characters is refused', (t) => {
  const pool = 'p'.repeat(65);
  t.match(reasonOf(t, `worker:${pool}`), /must be 1-64 characters/);
  t.end();
});

t.test('a URL of another scheme is refused', (t) => {
  t.match(reasonOf(t, 'https://example.com/hook'), /must start with worker:/);
  t.end();
});

t.test('any query but ?tags= is refused', (t) => {
  for (const url of [
    'worker:render?',
    'worker:render?pool=x',
    'worker:render?tag=gpu',
    'worker:render?tags=gpu&region=eu',
    'worker:render?region=eu&tags=gpu',
  ]) {
    t.equal(reasonOf(t, url), 'the only query a worker target takes is ?tags=a,b', url);
  }
  t.end();
});

t.test('repeated tags are refused', (t) => {
  t.equal(reasonOf(t, 'worker:render?tags=gpu,gpu'), 'tags must not repeat');
  t.equal(reasonOf(t, 'worker:render?tags=gpu,ssd,gpu'), 'tags must not repeat');
  t.end();
});

t.test('more than 16 tags are refused', (t) => {
  t.equal(reasonOf(t, `worker:p?tags=${tagList(WORKER_TAGS_MAX + 1)}`), 'at most 16 tags');
  t.end();
});

t.test('a bad tag is refused, naming it', (t) => {
  t.match(reasonOf(t, 'worker:render?tags=gpu,GPU'), /tag "GPU" must be 1-64 characters/);
  t.match(reasonOf(t, 'worker:render?tags='), /tag "" must be/, 'an empty list has an empty tag');
  t.match(reasonOf(t, 'worker:render?tags=gpu,'), /tag "" must be/, 'a trailing comma');
  t.match(reasonOf(t, 'worker:render?tags=a b'), /tag "a b" must be/);
  t.match(reasonOf(t, `worker:render?tags=${'x'.repeat(65)}`), /tag "x{65}" must be 1-64/);
  t.end();
});

t.test('workerTargetViolations names target.url and target.headers', (t) => {
  t.strictSame(workerTargetViolations('worker:render?tags=gpu', {}), [], 'a valid target');
  t.strictSame(workerTargetViolations('worker:Render', {}), [
    { field: 'target.url', reason: parseWorkerUrl('worker:Render') },
  ]);
  const headers = workerTargetViolations('worker:render', { 'x-api-key': 'k' });
  t.equal(headers.length, 1);
  t.equal(headers[0]?.field, 'target.headers');
  t.match(headers[0]?.reason, /takes no headers/);
  const both = workerTargetViolations('worker:render?tags=a,a', { a: 'b' }, 'jobs[2].');
  t.strictSame(
    both.map((v) => v.field),
    ['jobs[2].target.url', 'jobs[2].target.headers'],
    'both, under the prefix',
  );
  t.equal(both[0]?.reason, 'tags must not repeat');
  t.end();
});

t.test('offersAll: every needed tag must be offered', (t) => {
  const offered = new Set(['ssd', 'gpu']);
  t.equal(offersAll(offered, []), true, 'nothing needed');
  t.equal(offersAll(new Set(), []), true, 'nothing offered, nothing needed');
  t.equal(offersAll(offered, ['gpu']), true);
  t.equal(offersAll(offered, ['gpu', 'ssd']), true);
  t.equal(offersAll(offered, ['gpu', 'a100']), false, 'one missing');
  t.equal(offersAll(new Set(), ['gpu']), false);
  t.end();
});
