// Progress is the leader's view of one follower's log. These tests drive a Progress directly
// through the probe / replicate / snapshot states and check the rules the leader relies on:
// where `next` lands on each transition, that acknowledgements never move `match` backwards
// (so duplicated or reordered responses are harmless), that stale rejections are ignored, and
// when sending is paused.
import t from 'tap';
import { Progress } from '../../../src/raft/progress.js';

const make = (next = 6, match = 0): Progress => {
  const pr = new Progress(next, 4, 0, false);
  pr.match = match;
  return pr;
};

t.test('a new progress probes from the given next', (t) => {
  const pr = new Progress(11, 256, 0, true);
  t.equal(pr.state, 'probe');
  t.equal(pr.next, 11);
  t.equal(pr.match, 0);
  t.equal(pr.isLearner, true);
  t.notOk(pr.isPaused(), 'a fresh probe may send');
  t.end();
});

t.test('becomeReplicate starts right after match', (t) => {
  const pr = make(10, 5);
  pr.msgAppFlowPaused = true;
  pr.becomeReplicate();
  t.equal(pr.state, 'replicate');
  t.equal(pr.next, 6);
  t.equal(pr.msgAppFlowPaused, false);
  t.end();
});

t.test('becomeProbe from replicate restarts at match + 1 and empties the window', (t) => {
  const pr = make(10, 5);
  pr.becomeReplicate();
  pr.inflights.add(8, 10);
  pr.next = 9;
  pr.becomeProbe();
  t.equal(pr.state, 'probe');
  t.equal(pr.next, 6);
  t.equal(pr.inflights.count, 0);
  t.end();
});

t.test('becomeProbe from snapshot continues after the snapshot', (t) => {
  const pr = make(3, 2);
  pr.becomeSnapshot(20);
  t.equal(pr.state, 'snapshot');
  t.equal(pr.pendingSnapshot, 20);
  pr.becomeProbe();
  t.equal(pr.state, 'probe');
  t.equal(pr.next, 21, 'next = pendingSnapshot + 1');
  t.equal(pr.pendingSnapshot, 0);

  const ahead = make(3, 30);
  ahead.becomeSnapshot(20);
  ahead.becomeProbe();
  t.equal(ahead.next, 31, 'next = match + 1 when match passed the snapshot');

  const failed = make(3, 2);
  failed.becomeSnapshot(20);
  failed.pendingSnapshot = 0; // what reportSnapshot(failure) does
  failed.becomeProbe();
  t.equal(failed.next, 3, 'a failed snapshot falls back to match + 1');
  t.end();
});

t.test('maybeUpdate never moves match back', (t) => {
  const pr = make(6, 0);
  pr.becomeReplicate();
  t.equal(pr.maybeUpdate(5), true, 'first ack moves match');
  t.equal(pr.match, 5);
  t.equal(pr.next, 6);
  t.equal(pr.maybeUpdate(3), false, 'an older ack does not');
  t.equal(pr.match, 5, 'match stays');
  t.equal(pr.next, 6, 'next stays');
  t.equal(pr.maybeUpdate(5), false, 'a duplicate ack does not');
  t.equal(pr.maybeUpdate(9), true);
  t.equal(pr.match, 9);
  t.equal(pr.next, 10);
  // A random replay of acknowledgements, in any order, leaves match at the maximum.
  const acks = [4, 12, 7, 12, 1, 11, 3];
  let max = pr.match;
  for (const a of acks) {
    const before = pr.match;
    pr.maybeUpdate(a);
    max = Math.max(max, a);
    t.ok(pr.match >= before, `match monotonic after ack ${a}`);
  }
  t.equal(pr.match, max);
  t.end();
});

t.test('maybeUpdate keeps an optimistic next that is already ahead', (t) => {
  const pr = make(6, 0);
  pr.becomeReplicate();
  pr.next = 20; // appends up to 19 are in flight
  pr.maybeUpdate(10);
  t.equal(pr.next, 20, 'next is not pulled back by an ack');
  t.end();
});

t.test('maybeUpdate clears a sent probe', (t) => {
  const pr = make(6, 0);
  pr.msgAppFlowPaused = true;
  t.ok(pr.isPaused());
  pr.maybeUpdate(5);
  t.notOk(pr.msgAppFlowPaused);
  t.notOk(pr.isPaused());
  t.end();
});

t.test('maybeDecrTo in replicate: stale rejections are ignored', (t) => {
  const pr = make(6, 0);
  pr.maybeUpdate(5);
  pr.becomeReplicate();
  pr.next = 12;
  t.equal(pr.maybeDecrTo(5, 2), false, 'rejection at match is stale');
  t.equal(pr.maybeDecrTo(3, 2), false, 'rejection below match is stale');
  t.equal(pr.next, 12, 'next unchanged');
  t.equal(pr.match, 5);
  t.equal(pr.maybeDecrTo(9, 7), true, 'rejection above match counts');
  t.equal(pr.next, 6, 'next falls back to match + 1');
  t.equal(pr.match, 5, 'match never decreases');
  t.end();
});

t.test('maybeDecrTo in probe: only the outstanding probe counts', (t) => {
  const pr = make(10, 0);
  pr.msgAppFlowPaused = true;
  t.equal(pr.maybeDecrTo(5, 3), false, 'a rejection of an older probe is ignored');
  t.equal(pr.next, 10);
  t.ok(pr.msgAppFlowPaused, 'still waiting');
  t.equal(pr.maybeDecrTo(9, 3), true, 'rejection of next - 1');
  t.equal(pr.next, 4, 'next = hint + 1');
  t.notOk(pr.msgAppFlowPaused, 'may probe again');
  t.end();
});

t.test('maybeDecrTo in probe: the hint is bounded by rejected and by match', (t) => {
  const high = make(10, 0);
  t.equal(high.maybeDecrTo(9, 50), true);
  t.equal(high.next, 9, 'a hint past the rejected index cannot move next forward');

  const low = make(10, 4);
  t.equal(low.maybeDecrTo(9, 1), true);
  t.equal(low.next, 5, 'never below match + 1');

  const zero = make(1, 0);
  t.equal(zero.maybeDecrTo(0, 0), true);
  t.equal(zero.next, 1, 'never below 1');
  t.end();
});

t.test('isPaused per state', (t) => {
  const pr = new Progress(1, 2, 0, false);
  t.notOk(pr.isPaused(), 'probe without an outstanding probe');
  pr.msgAppFlowPaused = true;
  t.ok(pr.isPaused(), 'probe with an outstanding probe');
  pr.becomeReplicate();
  t.notOk(pr.isPaused(), 'replicate with room');
  pr.inflights.add(1, 1);
  pr.inflights.add(2, 1);
  pr.msgAppFlowPaused = pr.inflights.isFull(); // what the leader does after each send
  t.ok(pr.isPaused(), 'replicate with a full window');
  pr.msgAppFlowPaused = false; // what a heartbeat response does
  t.notOk(pr.isPaused(), 'a heartbeat response lets one more append out of a full window');
  pr.becomeSnapshot(10);
  t.ok(pr.isPaused(), 'snapshot always waits');
  pr.msgAppFlowPaused = false;
  t.ok(pr.isPaused(), 'even when the flow flag is clear');
  t.end();
});

t.test('every transition resets the window and the probe flag', (t) => {
  const pr = make(6, 5);
  for (const go of [
    () => pr.becomeReplicate(),
    () => pr.becomeProbe(),
    () => pr.becomeSnapshot(8),
  ]) {
    pr.inflights.add(100, 5);
    pr.msgAppFlowPaused = true;
    go();
    t.equal(pr.inflights.count, 0, `${pr.state}: window empty`);
    t.equal(pr.inflights.inflightBytes, 0, `${pr.state}: no bytes`);
    t.equal(pr.msgAppFlowPaused, false, `${pr.state}: pause flag clear`);
  }
  t.end();
});
