/**
 * The node's hand-out under noisy neighbours (hand-out-sim.ts): a quiet tenant's P0 runs leave
 * within 100 ms of their slots (virtual time, one CPU) while other tenants flood endpoints that
 * never answer, answer after 5 s, refuse or reset connections; and the simulator does catch a
 * hand-out that lets such an endpoint block everybody (the pace of an older runtime).
 */
import t from 'tap';
import { runHandOutSim, type HandOutSimOptions } from './hand-out-sim.js';

const SHAPES: Record<string, HandOutSimOptions['floods']> = {
  'never answers': [{ receiver: 'hang', jobs: 2000 }],
  'answers after 5 s': [{ receiver: 'slow', jobs: 2000 }],
  'refuses connections': [{ receiver: 'refuse', jobs: 2000 }],
  'resets connections': [{ receiver: 'reset', jobs: 2000 }],
  'is healthy but over its fire rate': [{ receiver: 'ok', jobs: 3000, firesPerSecond: 400 }],
  'all four at once': [
    { receiver: 'hang', jobs: 3000 },
    { receiver: 'slow', jobs: 3000 },
    { receiver: 'refuse', jobs: 3000 },
    { receiver: 'reset', jobs: 3000 },
  ],
};

for (const [name, floods] of Object.entries(SHAPES)) {
  t.test(`a quiet P0 leaves on time while a noisy tenant's endpoint ${name}`, (t) => {
    for (const seed of [1, 2, 3]) {
      const res = runHandOutSim({ seed, floods });
      const worst = Math.max(...res.quietLagsMs);
      t.strictSame(res.violations, [], `seed ${seed}: worst quiet P0 lag ${worst.toFixed(1)} ms`);
      t.ok(res.counts.noisySent > 0, `seed ${seed}: the noisy tenant's runs went out too`);
    }
    t.end();
  });
}

t.test(
  'a tenant over its fire rate waits its turn: all its runs go out, counted throttled',
  (t) => {
    const floods = SHAPES['is healthy but over its fire rate']!;
    const res = runHandOutSim({ seed: 4, floods });
    t.strictSame(res.violations, []);
    t.equal(res.counts.noisySent, 3000, 'every run went out, none dropped or missed');
    t.ok(res.counts.throttled >= 3000 - 2 * 400, `${res.counts.throttled} waited for the rate`);
    t.end();
  },
);

t.test('the simulator catches a hand-out paced on every queued attempt', (t) => {
  const unlimited = runHandOutSim({
    seed: 1,
    floods: SHAPES['is healthy but over its fire rate']!,
    pace: 'queued',
  });
  t.notOk(
    unlimited.ok,
    `a tenant's fire rate ignored is caught (${unlimited.violations[0] ?? ''})`,
  );
  for (const shape of ['never answers', 'answers after 5 s'] as const) {
    const res = runHandOutSim({ seed: 1, floods: SHAPES[shape]!, pace: 'queued' });
    t.notOk(res.ok, `${shape}: the older pace is caught (${res.violations[0] ?? 'nothing'})`);
  }
  t.end();
});
