// applyConfChange is the pure configuration algebra behind membership changes: the same function
// refuses bad changes at propose time and applies committed ones on every replica. The tests
// apply single and joint changes to hand-built ConfStates and compare the result field by field,
// check every refusal (removing all voters, a simple change of two voters, entering joint while
// joint, leaving when not joint), and finish with a seeded random walk that checks the
// configuration invariants after every accepted change (Raft thesis §4.3).
import t, { type Test } from 'tap';
import { SeededRand } from '../../../src/base/rand.js';
import {
  allMembers,
  applyConfChange,
  decodeConfChange,
  encodeConfChange,
  isJoint,
  isLeaveJoint,
  isVoter,
} from '../../../src/raft/conf-change.js';
import type {
  ConfChange,
  ConfChangeSingle,
  ConfChangeType,
  ConfState,
  NodeId,
} from '../../../src/raft/messages.js';

const conf = (voters: NodeId[], learners: NodeId[] = []): ConfState => ({
  voters,
  votersOutgoing: [],
  learners,
  learnersNext: [],
  autoLeave: false,
});

const add = (nodeId: NodeId): ConfChangeSingle => ({ type: 'add-voter', nodeId });
const learner = (nodeId: NodeId): ConfChangeSingle => ({ type: 'add-learner', nodeId });
const remove = (nodeId: NodeId): ConfChangeSingle => ({ type: 'remove-node', nodeId });
const simple = (ch: ConfChangeSingle): ConfChange => ({ transition: 'simple', changes: [ch] });
const LEAVE: ConfChange = { transition: 'explicit', changes: [] };

function ok(t: Test, cs: ConfState, cc: ConfChange): ConfState {
  const r = applyConfChange(cs, cc);
  if (!r.ok) {
    t.fail(`unexpected refusal: ${r.reason}`);
    return cs;
  }
  return r.confState;
}

function refused(t: Test, cs: ConfState, cc: ConfChange, pattern: RegExp, what: string): void {
  const r = applyConfChange(cs, cc);
  t.equal(r.ok, false, `${what}: refused`);
  if (!r.ok) t.match(r.reason, pattern, `${what}: reason`);
}

t.test('simple changes move at most one voter', (t) => {
  const base = conf(['n1', 'n2', 'n3']);
  t.same(ok(t, base, simple(add('n4'))), conf(['n1', 'n2', 'n3', 'n4']), 'add a voter');
  t.same(ok(t, base, simple(remove('n2'))), conf(['n1', 'n3']), 'remove a voter');
  t.same(ok(t, base, simple(learner('n4'))), conf(['n1', 'n2', 'n3'], ['n4']), 'add a learner');
  t.same(
    ok(t, conf(['n1', 'n2'], ['n3']), simple(add('n3'))),
    conf(['n1', 'n2', 'n3']),
    'promote a learner',
  );
  t.same(ok(t, base, simple(learner('n3'))), conf(['n1', 'n2'], ['n3']), 'demote a voter');
  t.same(ok(t, conf(['n1'], ['n2']), simple(remove('n2'))), conf(['n1']), 'remove a learner');
  t.same(ok(t, base, simple(add('n2'))), base, 'adding an existing voter changes nothing');
  t.same(ok(t, base, simple(remove('n9'))), base, 'removing a stranger changes nothing');
  t.end();
});

t.test('simple changes are refused when they move two voters', (t) => {
  const base = conf(['n1', 'n2', 'n3']);
  refused(
    t,
    base,
    { transition: 'simple', changes: [add('n4'), add('n5')] },
    /at most one voter/,
    'add two voters',
  );
  refused(
    t,
    base,
    { transition: 'simple', changes: [remove('n1'), add('n4')] },
    /at most one voter/,
    'replace a voter',
  );
  refused(
    t,
    base,
    { transition: 'simple', changes: [learner('n1'), remove('n2')] },
    /at most one voter/,
    'demote one, remove another',
  );
  const r = applyConfChange(base, {
    transition: 'simple',
    changes: [add('n4'), learner('n5'), learner('n6')],
  });
  t.ok(r.ok, 'one voter plus any number of learners is fine');
  t.end();
});

t.test('removing every voter is refused', (t) => {
  refused(t, conf(['n1']), simple(remove('n1')), /every voter/, 'remove the only voter');
  refused(t, conf(['n1']), simple(learner('n1')), /every voter/, 'demote the only voter');
  refused(
    t,
    conf(['n1', 'n2']),
    { transition: 'auto', changes: [remove('n1'), remove('n2')] },
    /every voter/,
    'joint change removing both voters',
  );
  t.end();
});

t.test('an empty node id is refused', (t) => {
  refused(t, conf(['n1']), simple(add('')), /empty node id/, 'empty id');
  t.end();
});

t.test('entering and leaving a joint configuration', (t) => {
  const base = conf(['n1', 'n2', 'n3']);
  const joint = ok(t, base, { transition: 'explicit', changes: [add('n4'), remove('n1')] });
  t.same(joint, {
    voters: ['n2', 'n3', 'n4'],
    votersOutgoing: ['n1', 'n2', 'n3'],
    learners: [],
    learnersNext: [],
    autoLeave: false,
  });
  t.ok(isJoint(joint));
  t.notOk(isJoint(base));
  t.ok(isVoter(joint, 'n1'), 'an outgoing-only voter is still a voter');
  t.ok(isVoter(joint, 'n4'));
  t.same([...allMembers(joint)].sort(), ['n1', 'n2', 'n3', 'n4']);
  const left = ok(t, joint, LEAVE);
  t.same(left, conf(['n2', 'n3', 'n4']), 'leaving keeps the incoming half');
  t.notOk(isVoter(left, 'n1'));

  const auto = ok(t, base, { transition: 'auto', changes: [add('n4')] });
  t.equal(auto.autoLeave, true, "'auto' asks for an automatic leave");
  t.equal(ok(t, auto, { transition: 'auto', changes: [] }).autoLeave, false, 'cleared on leave');

  const single = ok(t, base, { transition: 'explicit', changes: [add('n4')] });
  t.ok(isJoint(single), 'even one change enters joint unless it is simple');
  t.end();
});

t.test('a demoted voter waits in learnersNext until the joint config is left', (t) => {
  const base = conf(['n1', 'n2', 'n3'], ['n5']);
  const joint = ok(t, base, { transition: 'explicit', changes: [learner('n3'), add('n4')] });
  t.same(joint, {
    voters: ['n1', 'n2', 'n4'],
    votersOutgoing: ['n1', 'n2', 'n3'],
    learners: ['n5'],
    learnersNext: ['n3'],
    autoLeave: false,
  });
  t.notOk(joint.learners.includes('n3'), 'not a learner while it is an outgoing voter');
  t.ok(isVoter(joint, 'n3'));
  const left = ok(t, joint, LEAVE);
  t.same(left, conf(['n1', 'n2', 'n4'], ['n3', 'n5']), 'n3 is a learner after leaving');

  const newLearner = ok(t, base, { transition: 'explicit', changes: [learner('n6')] });
  t.same(newLearner.learners, ['n5', 'n6'], 'a node that was not a voter becomes one at once');
  t.same(newLearner.learnersNext, []);

  const undo = ok(t, base, {
    transition: 'explicit',
    changes: [learner('n3'), add('n3')],
  });
  t.same(undo.learnersNext, [], 'a later add-voter cancels the demotion');
  t.same(undo.voters, ['n1', 'n2', 'n3']);
  t.end();
});

t.test('joint changes are refused while joint, leaving is refused when not joint', (t) => {
  const joint = ok(t, conf(['n1', 'n2', 'n3']), { transition: 'auto', changes: [add('n4')] });
  refused(t, joint, { transition: 'auto', changes: [add('n5')] }, /joint/, 'enter while joint');
  refused(t, joint, simple(add('n5')), /joint/, 'simple change while joint');
  refused(t, conf(['n1', 'n2']), LEAVE, /not joint/, 'leave when not joint');
  refused(t, conf(['n1']), { transition: 'simple', changes: [] }, /not joint/, 'empty simple');
  t.end();
});

t.test('applyConfChange does not mutate its input', (t) => {
  const base = conf(['n1', 'n2', 'n3'], ['n4']);
  const copy = structuredClone(base);
  ok(t, base, { transition: 'auto', changes: [remove('n1'), learner('n2'), add('n4')] });
  t.same(base, copy);
  t.end();
});

t.test('encodeConfChange / decodeConfChange round-trip', (t) => {
  const cc: ConfChange = { transition: 'auto', changes: [add('n4'), learner('n2'), remove('n1')] };
  t.same(decodeConfChange(encodeConfChange(cc)), cc);
  t.ok(isLeaveJoint({ transition: 'auto', changes: [] }));
  t.notOk(isLeaveJoint(cc));
  t.end();
});

t.test('seeded random walk keeps the configuration invariants', (t) => {
  const rand = new SeededRand(4242);
  const pool = ['a', 'b', 'c', 'd', 'e', 'f'];
  const types: ConfChangeType[] = ['add-voter', 'add-learner', 'remove-node'];
  let cs = conf(['a', 'b', 'c']);
  let accepted = 0;
  let violations = 0;
  for (let step = 0; step < 3000; step++) {
    let cc: ConfChange;
    if (isJoint(cs) && rand.chance(0.5)) {
      cc = { transition: rand.chance(0.5) ? 'auto' : 'explicit', changes: [] };
    } else {
      const n = 1 + rand.int(3);
      const changes: ConfChangeSingle[] = [];
      for (let i = 0; i < n; i++) {
        changes.push({ type: types[rand.int(3)]!, nodeId: pool[rand.int(pool.length)]! });
      }
      const transition = (['auto', 'explicit', 'simple'] as const)[rand.int(3)]!;
      cc = { transition, changes };
    }
    const r = applyConfChange(cs, cc);
    if (!r.ok) continue;
    accepted++;
    const next = r.confState;
    const voters = new Set(next.voters);
    const outgoing = new Set(next.votersOutgoing);
    const problems: string[] = [];
    if (voters.size === 0) problems.push('no voters');
    if (next.learners.some((id) => voters.has(id))) problems.push('voter and learner');
    if (next.learners.some((id) => outgoing.has(id))) problems.push('outgoing voter and learner');
    if (next.learnersNext.some((id) => !outgoing.has(id)))
      problems.push('learnersNext not outgoing');
    if (next.learnersNext.some((id) => voters.has(id))) problems.push('learnersNext is voter');
    if (!isJoint(next) && next.learnersNext.length > 0) problems.push('learnersNext not joint');
    if (!isJoint(next) && next.autoLeave) problems.push('autoLeave outside joint');
    if (cc.transition === 'simple' && cc.changes.length > 0) {
      let moved = 0;
      for (const id of next.voters) if (!cs.voters.includes(id)) moved++;
      for (const id of cs.voters) if (!voters.has(id)) moved++;
      if (moved > 1) problems.push('simple change moved two voters');
    }
    for (const list of [next.voters, next.votersOutgoing, next.learners, next.learnersNext]) {
      if (list.join() !== [...list].sort().join()) problems.push('unsorted');
      if (new Set(list).size !== list.length) problems.push('duplicate');
    }
    if (problems.length > 0) {
      violations++;
      if (violations <= 3) t.fail('invariant broken', { from: cs, change: cc, to: next, problems });
    }
    cs = next;
  }
  t.ok(accepted > 300, `enough accepted changes (${accepted})`);
  t.equal(violations, 0, 'no invariant broken');
  t.end();
});
