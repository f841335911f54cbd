// A short chaos run of the membership nemesis inside `npm test`: a proxied 4-node cluster of
// real processes, 45 s of workload while replicas are moved (AdminService.MoveReplica) and a
// node is drained and given its replicas back (DrainNode, UndrainNode, Rebalance), with kill -9,
// SIGSTOP pauses and partitions landing in the middle of the moves; then the final heal, which
// waits until no move is in flight, the reads and the checker. It passes only when the checker
// finds no violation, some membership operation completed, and the cluster ends with no move in
// flight and every data group at 3 replicas.
//
// The seed comes from the clock and is printed; TICKRAFT_CHAOS_SEED=42 replays one. Kept short
// (about 2 minutes in all) because test/chaos/short-run.test.ts already covers the other
// nemeses; longer membership runs are in docs/chaos.md.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { renderCounts, runChaos, type ChaosOptions } from '../../chaos/run.js';

t.test('a short chaos run with replica moves during faults passes the checker', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-chaos-membership-'));
  const seed = process.env['TICKRAFT_CHAOS_SEED'] ?? String(1 + (Date.now() % 100_000));
  const o: ChaosOptions = {
    timeSec: 45,
    seed,
    nemeses: ['kill', 'pause', 'partition', 'membership'],
    nodes: 4,
    dir,
    lagBoundMs: 3000,
    recoveryAllowanceMs: 20_000,
    processes: 4,
    jobsPerProcess: 5,
    membershipGapMs: [2000, 4000],
    log: (line) => t.comment(line),
  };
  const r = await runChaos(o);
  t.comment(r.summary);
  t.comment(renderCounts(r, o));
  t.equal(r.report.verdict, 'ok', `checker verdict (run kept in ${dir}; replay: ${r.replay})`);
  const m = r.nemesis.membership!;
  const ops = Object.values(m.byKind).flatMap((byOutcome) => Object.entries(byOutcome));
  const done = ops.filter(([o]) => o === 'done').reduce((a, [, n]) => a + n, 0);
  t.ok(done >= 1, `membership operations completed: ${JSON.stringify(m.byKind)}`);
  t.same(
    r.nemesis.settled,
    { movesLeft: 0, groupsNotAtThree: 0 },
    'after the final heal no move is in flight and every data group has 3 replicas',
  );
  t.ok(r.report.slots.slotsOwed > 50, `${r.report.slots.slotsOwed} owed slots were checked`);
  t.equal(r.unreadJobs, 0, 'every job touched was read at the end');
  if (t.passing()) rmSync(dir, { recursive: true, force: true });
  else printOperations(t, dir);
});

/**
 * On a failure, what the membership operations did, for a log that outlives the machine: each
 * operation's records, and the move steps and leader changes the nodes logged for the groups
 * they moved.
 */
function printOperations(t: Test, dir: string): void {
  const kinds = new Set(['replica-move', 'node-drain', 'rebalance']);
  const groups = new Set<number>();
  for (const line of readFileSync(join(dir, 'nemesis.jsonl'), 'utf8').split('\n')) {
    if (line === '') continue;
    const rec = JSON.parse(line) as { kind?: string; spec?: { groupId?: number } };
    if (rec.kind === undefined || !kinds.has(rec.kind)) continue;
    t.comment(line);
    if (rec.spec?.groupId !== undefined) groups.add(rec.spec.groupId);
  }
  const logs = join(dir, 'logs');
  for (const file of readdirSync(logs).sort()) {
    const wanted = readFileSync(join(logs, file), 'utf8')
      .split('\n')
      .filter(
        (l) =>
          l.includes('"msg":"move') ||
          (l.includes('"msg":"leader changed"') &&
            [...groups].some((g) => l.includes(`"group":${g},`))),
      );
    for (const l of wanted.slice(0, 200)) t.comment(`${file}: ${l.slice(0, 300)}`);
  }
}
