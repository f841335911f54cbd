// The audits the simulator's agreement check relies on: silent after any sequence of commands
// (and after a snapshot round trip), and naming the index that drifted when one does.
import t from 'tap';
import { decode, encode } from '../../../src/base/codec.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { IdIndex } from '../../../src/scheduler/id-index.js';
import type { HistoryImage } from '../../../src/scheduler/run-table.js';
import { randomCommands } from './fixtures.js';

function replayed(seed: number): SchedulerStateMachine {
  const sm = new SchedulerStateMachine();
  for (const c of randomCommands(seed, 300)) sm.applyCommand(c);
  return sm;
}

t.test('a state built by commands, or restored, agrees with a full scan', (t) => {
  for (let seed = 1; seed <= 20; seed++) {
    const sm = replayed(seed);
    t.same(sm.auditIndexes(), [], `seed ${seed}: applied`);
    const copy = new SchedulerStateMachine();
    copy.restore(sm.snapshot());
    t.same(copy.auditIndexes(), [], `seed ${seed}: restored`);
    t.same(Buffer.from(copy.snapshot()), Buffer.from(sm.snapshot()), 'round trip is exact');
  }
  t.end();
});

/** A snapshot of `sm` with one part rewritten, as a replica that drifted would hold it. */
function drifted(
  sm: SchedulerStateMachine,
  change: (s: { histories: HistoryImage[]; dead: string[] }) => void,
): SchedulerStateMachine {
  const s = decode(sm.snapshot()) as { histories: HistoryImage[]; dead: string[] };
  change(s);
  const out = new SchedulerStateMachine();
  out.restore(encode(s));
  return out;
}

t.test('the audit names a run history or a dead-letter set that drifted', (t) => {
  let seed = 1;
  let sm = replayed(seed);
  while (sm.dead.size === 0 || sm.runs.liveSize === 0) sm = replayed(++seed);
  const relabelled = drifted(sm, (s) => {
    const statuses = s.histories.find(([, , st]) => st.some((c) => c >= 0))![2];
    const i = statuses.findIndex((c) => c >= 0);
    statuses[i] = statuses[i] === 3 ? 4 : 3;
  });
  t.match(relabelled.auditIndexes().join('\n'), /history of .*: .* is [A-Z]+, listed as \d/);
  // A live run gone while its job's history still lists it.
  const lost = drifted(sm, (s) => {
    (s as unknown as { runs: unknown[] }).runs.shift();
  });
  t.match(lost.auditIndexes().join('\n'), /is live but not held/);
  const noDead = drifted(sm, (s) => {
    s.dead = [];
  });
  t.match(noDead.auditIndexes().join('\n'), /dead: .* is DEAD but not listed/);
  const extra = drifted(sm, (s) => {
    s.dead.push('nope:1');
  });
  t.match(extra.auditIndexes().join('\n'), /dead: nope:1 listed but not DEAD/);
  t.end();
});

t.test('the id index audit finds every id by hashing, after growth and deletes', (t) => {
  const ix = new IdIndex();
  for (let i = 0; i < 5000; i++) ix.add(`job-${i}`, i);
  for (let i = 0; i < 5000; i += 3) ix.delete(`job-${i}`);
  t.same(ix.audit(), []);
  t.end();
});
