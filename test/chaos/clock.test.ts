// The clock nemesis on a real process: libfaketime preloaded directly (no wrapper, so the PID is
// the process), a bump moves Date.now() and leaves timers alone, a drift runs the wall clock at
// its rate from the true time (no jump), a reset puts it back. If libfaketime is missing this
// fails with the message naming it: `npm test` installs it (scripts/ensure-package.sh).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { findFaketimeLibrary, NodeClocks } from '../../chaos/nemesis/clock.js';
import { eventually } from '../helpers/cluster.js';

t.test('bump, drift and reset move a preloaded process wall clock', async (t) => {
  let library: string;
  try {
    library = findFaketimeLibrary();
  } catch (err) {
    t.fail((err as Error).message);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-clock-'));
  const clocks = new NodeClocks(library, dir);
  // The child prints its wall clock every 100 ms, driven by a timer (monotonic, not faked).
  const child = spawn(
    process.execPath,
    ['-e', 'setInterval(() => process.stdout.write(`${Date.now()}\\n`), 100)'],
    { env: { ...process.env, ...clocks.envFor('n1') }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const startedAt = Date.now();
  t.teardown(() => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  let skew = 0;
  let lines = 0;
  child.stdout.on('data', (d: Buffer) => {
    const now = Date.now();
    for (const l of d.toString().trim().split('\n')) {
      skew = Number(l) - now;
      lines++;
    }
  });
  await eventually(
    () => (lines > 3 ? Promise.resolve() : Promise.reject(new Error('no output'))),
    20_000,
  );
  t.ok(Math.abs(skew) < 200, `no skew at +0 x1 (${skew} ms)`);

  clocks.bump('n1', -4000);
  await eventually(
    () => (skew < -3500 ? Promise.resolve() : Promise.reject(new Error(`skew ${skew}`))),
    10_000,
  );
  t.ok(skew > -4500, `bumped back 4 s (${skew} ms), still printing every 100 ms`);
  const before = lines;
  await new Promise((r) => setTimeout(r, 1000));
  t.ok(lines - before >= 5, 'timers keep firing after a backward step');

  clocks.drift('n1', 1.05, startedAt, Date.now());
  await eventually(
    () => (skew > -500 ? Promise.resolve() : Promise.reject(new Error(`skew ${skew}`))),
    10_000,
  );
  t.ok(skew < 1000, `a drift starts near the true time, no jump over the uptime (${skew} ms)`);
  await new Promise((r) => setTimeout(r, 3000));
  t.ok(skew > 0, `the drifted clock runs ahead (${skew} ms)`);

  clocks.reset('n1');
  await eventually(
    () => (Math.abs(skew) < 200 ? Promise.resolve() : Promise.reject(new Error(`skew ${skew}`))),
    10_000,
  );
  t.pass('reset to the true time');
  t.equal(clocks.spec('n1'), '+0 x1');
});
