// The linearizability checker must accept every linearizable history, reject every other one with
// a report that points at the right partition and operations, treat unknown-outcome operations as
// "took effect at some point after their call, or never", and give up with 'unknown' instead of
// hanging. Method: hand-written key-value histories for each kind of anomaly, then a seeded
// differential test against a brute-force checker that tries every order consistent with
// real-time order on small random histories (SeededRand, so any failure replays from its seed).
import t from 'tap';
import type { Test } from 'tap';
import { AssertionError } from '../../../src/base/assert.js';
import { SeededRand } from '../../../src/base/rand.js';
import { ValidationError } from '../../../src/base/errors.js';
import {
  UNKNOWN_RETURN,
  checkLinearizability,
  compileCheckOptions,
  describeCheckResult,
  describeViolation,
  isOutcomeUnknown,
  kvModel,
} from '../../../chaos/checkers/linearizability.js';
import type {
  CheckResult,
  KvInput,
  KvOutput,
  KvState,
  Model,
  Operation,
  PartitionResult,
  Violation,
} from '../../../chaos/checkers/linearizability.js';

type KvOp = Operation<KvInput, KvOutput>;
type KvResult = CheckResult<KvState, KvInput, KvOutput>;

const put = (key: string, value: string): KvInput => ({ op: 'put', key, value });
const get = (key: string): KvInput => ({ op: 'get', key });
const cas = (key: string, expect: string | null, value: string): KvInput => ({
  op: 'cas',
  key,
  expect,
  value,
});
const append = (key: string, value: string): KvInput => ({ op: 'append', key, value });

/** A completed operation. put and append acknowledge with null. */
function done(
  clientId: number,
  call: number,
  ret: number,
  input: KvInput,
  output?: KvOutput,
): KvOp {
  return { clientId, input, output: output ?? null, call, ret };
}

/** An operation whose outcome the client never learnt. */
function info(clientId: number, call: number, input: KvInput): KvOp {
  return { clientId, input, call, ret: UNKNOWN_RETURN };
}

function check(history: readonly KvOp[]): KvResult {
  return checkLinearizability(kvModel, history);
}

function onlyViolation(t: Test, result: KvResult): Violation<KvState, KvInput, KvOutput> {
  const illegal = result.partitions.filter((p) => p.outcome === 'illegal');
  t.equal(illegal.length, 1, 'exactly one illegal partition');
  const p = illegal[0]!;
  if (p.outcome !== 'illegal') throw new Error('unreachable');
  return p.violation;
}

function linearization(result: KvResult, name: string): readonly number[] | undefined {
  const p = result.partitions.find((x) => x.name === name);
  return p?.outcome === 'ok' ? p.linearization : undefined;
}

t.test('an empty history is linearizable', (t) => {
  const result = check([]);
  t.equal(result.outcome, 'ok');
  t.same(result.partitions, []);
  t.end();
});

t.test('a sequential history of every operation kind is linearizable', (t) => {
  const history = [
    done(1, 0, 1, get('x'), null),
    done(1, 2, 3, put('x', 'a')),
    done(2, 4, 5, get('x'), 'a'),
    done(2, 6, 7, append('x', 'b')),
    done(1, 8, 9, get('x'), 'ab'),
    done(1, 10, 11, cas('x', 'ab', 'c'), true),
    done(2, 12, 13, cas('x', 'ab', 'd'), false),
    done(2, 14, 15, get('x'), 'c'),
    done(3, 16, 17, append('y', 'z')),
    done(3, 18, 19, cas('y', 'z', 'w'), true),
    done(3, 20, 21, cas('q', null, 'new'), true),
    done(3, 22, 23, get('q'), 'new'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'ok', describeCheckResult(kvModel, result));
  t.same(
    result.partitions.map((p) => p.name),
    ['x', 'y', 'q'],
  );
  t.same(linearization(result, 'x'), [0, 1, 2, 3, 4, 5, 6, 7], 'the witness is the real order');
  t.end();
});

t.test('overlapping operations may take effect in either order', (t) => {
  // A long put of b overlaps two reads; the earlier read saw b and the later one a: fine only
  // because the reads overlap each other too, so a's read linearizes first.
  const history = [
    done(0, 0, 1, put('x', 'a')),
    done(1, 2, 10, put('x', 'b')),
    done(2, 3, 6, get('x'), 'b'),
    done(3, 4, 7, get('x'), 'a'),
    done(4, 5, 9, append('x', 'c')),
    done(5, 11, 12, get('x'), 'bc'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'ok', describeCheckResult(kvModel, result));
  t.same(linearization(result, 'x'), [0, 3, 1, 2, 4, 5]);
  t.end();
});

t.test('equal timestamps count as concurrent (closed intervals, calls before returns)', (t) => {
  // put b is called at the instant put a returns, so the read of a may follow both.
  const touching = [
    done(1, 0, 2, put('x', 'a')),
    done(2, 2, 4, put('x', 'b')),
    done(3, 5, 6, get('x'), 'a'),
  ];
  t.equal(check(touching).outcome, 'ok');
  const ordered = [
    done(1, 0, 2, put('x', 'a')),
    done(2, 3, 4, put('x', 'b')),
    done(3, 5, 6, get('x'), 'a'),
  ];
  t.equal(check(ordered).outcome, 'illegal', 'one tick apart they are ordered');
  t.end();
});

t.test('a stale read after a completed write is illegal', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    done(1, 2, 3, put('x', 'b')),
    done(2, 4, 5, get('x'), 'a'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'illegal');
  const v = onlyViolation(t, result);
  t.equal(v.partition, 'x');
  t.same(
    v.prefix.map((p) => p.index),
    [0, 1],
  );
  t.equal(v.stateAfterPrefix, 'b');
  t.equal(v.blocking.index, 2);
  t.same(
    v.candidates.map((c) => [c.index, c.reason]),
    [[2, 'illegal']],
  );
  t.same(
    v.unplaced.map((u) => u.index),
    [2],
  );
  t.end();
});

t.test('a lost write is illegal', (t) => {
  // The append was acknowledged, yet a later read shows the value without it.
  const history = [
    done(1, 0, 1, put('x', 'a')),
    done(2, 2, 3, append('x', 'b')),
    done(3, 4, 5, get('x'), 'a'),
  ];
  t.equal(check(history).outcome, 'illegal');
  // An acknowledged put that a later read does not see at all.
  const vanished = [done(1, 0, 1, put('x', 'a')), done(2, 2, 3, get('x'), null)];
  t.equal(check(vanished).outcome, 'illegal');
  t.end();
});

t.test('cas anomalies are illegal', (t) => {
  // Two concurrent cas from the same expected value cannot both succeed.
  const doubleSwap = [
    done(0, 0, 1, put('x', '0')),
    done(1, 2, 5, cas('x', '0', '1'), true),
    done(2, 2, 5, cas('x', '0', '2'), true),
  ];
  const result = check(doubleSwap);
  t.equal(result.outcome, 'illegal');
  const v = onlyViolation(t, result);
  t.same(
    v.prefix.map((p) => p.index),
    [0, 1],
  );
  t.same(
    v.candidates.map((c) => [c.index, c.reason]),
    [[2, 'illegal']],
  );
  // One of them failing is fine.
  const oneFails = [
    done(0, 0, 1, put('x', '0')),
    done(1, 2, 5, cas('x', '0', '1'), true),
    done(2, 2, 5, cas('x', '0', '2'), false),
  ];
  t.equal(check(oneFails).outcome, 'ok');
  // A cas that reports failure although nothing could have changed the value.
  const falseFailure = [done(0, 0, 1, put('x', 'a')), done(1, 2, 3, cas('x', 'a', 'b'), false)];
  t.equal(check(falseFailure).outcome, 'illegal');
  t.end();
});

t.test('a read of a value never written is illegal', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    done(2, 0, 4, put('x', 'b')),
    done(3, 2, 3, get('x'), 'z'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'illegal');
  const v = onlyViolation(t, result);
  t.equal(v.blocking.index, 2);
  t.ok(
    v.candidates.some((c) => c.index === 2 && c.reason === 'illegal'),
    'the read itself is illegal',
  );
  t.end();
});

t.test('non-monotonic reads across clients are illegal', (t) => {
  // b is being written; client 2 sees it, then client 3, strictly later, sees the old a.
  const history = [
    done(0, 0, 1, put('x', 'a')),
    done(1, 2, 10, put('x', 'b')),
    done(2, 3, 4, get('x'), 'b'),
    done(3, 5, 6, get('x'), 'a'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'illegal');
  const v = onlyViolation(t, result);
  t.same(
    v.prefix.map((p) => p.index),
    [0, 1, 2],
  );
  t.equal(v.blocking.index, 3);
  t.end();
});

t.test('an unknown-outcome write may have taken effect', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, put('x', 'b')),
    done(3, 5, 6, get('x'), 'b'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'ok');
  t.same(linearization(result, 'x'), [0, 1, 2], 'the witness includes the unknown put');
  t.end();
});

t.test('an unknown-outcome write may never have taken effect', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, put('x', 'b')),
    done(3, 5, 6, get('x'), 'a'),
    done(3, 7, 8, get('x'), 'a'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'ok');
  t.same(linearization(result, 'x'), [0, 2, 3], 'the witness leaves the unknown put out');
  t.end();
});

t.test('an unknown-outcome write may take effect long after its call', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, put('x', 'b')),
    done(3, 5, 6, get('x'), 'a'),
    done(3, 100, 101, get('x'), 'b'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'ok');
  t.same(linearization(result, 'x'), [0, 2, 1, 3]);
  t.end();
});

t.test('an unknown-outcome write cannot be undone or act before its call', (t) => {
  const undone = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, put('x', 'b')),
    done(3, 5, 6, get('x'), 'b'),
    done(3, 7, 8, get('x'), 'a'),
  ];
  t.equal(check(undone).outcome, 'illegal', 'once seen, it happened');
  const early = [
    done(1, 0, 1, put('x', 'a')),
    done(3, 5, 6, get('x'), 'b'),
    info(2, 10, put('x', 'b')),
  ];
  t.equal(check(early).outcome, 'illegal', 'a read cannot see a write not yet called');
  t.end();
});

t.test('an unknown-outcome cas swaps only if its expectation held', (t) => {
  const swapped = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, cas('x', 'a', 'b')),
    done(3, 5, 6, get('x'), 'b'),
  ];
  t.equal(check(swapped).outcome, 'ok');
  const impossible = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, cas('x', 'z', 'b')),
    done(3, 5, 6, get('x'), 'b'),
  ];
  t.equal(check(impossible).outcome, 'illegal', 'its expectation never held');
  t.end();
});

t.test('unknown-outcome reads are dropped before the search', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    info(2, 2, get('x')),
    done(3, 5, 6, get('x'), 'a'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'ok');
  t.same(linearization(result, 'x'), [0, 2]);
  t.equal(result.partitions[0]!.operationCount, 3, 'still counted in the partition');
  t.end();
});

t.test('per-key partitions: only the bad key is reported, by name', (t) => {
  const history = [
    done(1, 0, 1, put('a', '1')),
    done(2, 0, 1, put('b', '1')),
    done(3, 0, 1, put('c', '1')),
    done(1, 2, 3, put('b', '2')),
    done(2, 2, 3, get('a'), '1'),
    done(3, 2, 3, append('c', '2')),
    done(1, 4, 5, get('c'), '12'),
    done(2, 4, 5, get('b'), '1'),
    done(3, 4, 5, get('a'), '1'),
  ];
  const result = check(history);
  t.equal(result.outcome, 'illegal');
  t.same(
    result.partitions.map((p) => [p.name, p.outcome, p.operationCount]),
    [
      ['a', 'ok', 3],
      ['b', 'illegal', 3],
      ['c', 'ok', 3],
    ],
  );
  const v = onlyViolation(t, result);
  t.equal(v.partition, 'b');
  t.same(
    v.prefix.map((p) => p.index),
    [1, 3],
    'indexes refer to the whole history',
  );
  t.equal(v.blocking.index, 7);
  const text = describeCheckResult(kvModel, result);
  t.match(text, /^linearizability: illegal \(3 partitions, \d+ steps\)$/m);
  t.match(text, /^ {2}"b": illegal \(3 operations, \d+ steps\)$/m);
  t.match(text, /^partition "b" is not linearizable\.$/m);
  t.notMatch(text, /partition "a" is not/);
  t.end();
});

t.test('describeViolation explains the prefix, the state and the failed candidates', (t) => {
  const history = [
    done(1, 0, 1, put('x', 'a')),
    done(2, 2, 9, put('x', 'b')),
    done(3, 3, 4, get('x'), 'b'),
    done(4, 5, 6, get('x'), 'a'),
    info(5, 5, append('x', 'c')),
    done(6, 10, 11, get('x'), 'b'),
  ];
  const result = check(history);
  const v = onlyViolation(t, result);
  t.equal(
    describeViolation(kvModel, v),
    [
      'partition "x" is not linearizable.',
      'Longest linearizable prefix: 3 operations (3 of 5 completed ones):',
      '  1. #0 client 1: put("x", "a") @[0, 1]  => "a"',
      '  2. #1 client 2: put("x", "b") @[2, 9]  => "b"',
      '  3. #2 client 3: get("x") -> "b" @[3, 4]  => "b"',
      'After it the state is "b", and no operation can come next. #3 client 4: get("x") -> "a" ' +
        '@[5, 6] had returned before anything else left was called, so one of these had to be next:',
      '  #3 client 4: get("x") -> "a" @[5, 6]: illegal in this state',
      '  #4 client 5: append("x", "c") -> ? @[5, unknown]: legal here, but every continuation ' +
        'from it fails',
      'Never linearized (2 completed): #3, #5',
    ].join('\n'),
  );
  t.end();
});

/** Many concurrent unknown appends and a read no order can produce: a huge search space. */
function explosiveHistory(width: number): KvOp[] {
  const history: KvOp[] = [done(0, 0, 1, put('x', ''))];
  for (let i = 0; i < width; i++) history.push(info(i + 1, 2, append('x', String(i % 10))));
  history.push(done(99, 3, 4, get('x'), 'never'));
  return history;
}

t.test('a tiny step cap gives unknown, deterministically', (t) => {
  const history = explosiveHistory(12);
  const a = checkLinearizability(kvModel, history, { partitionStepsMax: 500 });
  const b = checkLinearizability(kvModel, history, { partitionStepsMax: 500 });
  t.equal(a.outcome, 'unknown');
  t.same(
    a.partitions.map((p) => [p.outcome, p.outcome === 'unknown' ? p.reason : '', p.steps]),
    [['unknown', 'step-cap', 500]],
  );
  t.same(a, b, 'same history and cap, same answer');
  t.match(describeCheckResult(kvModel, a), /"x": unknown: step cap reached/);
  // A cap of one step cannot even visit the first entry of a two-operation history.
  const small = [done(1, 0, 1, put('x', 'a')), done(2, 2, 3, get('x'), 'a')];
  t.equal(checkLinearizability(kvModel, small, { partitionStepsMax: 1 }).outcome, 'unknown');
  t.equal(checkLinearizability(kvModel, small, { partitionStepsMax: 5 }).outcome, 'ok');
  t.end();
});

t.test('a spent time budget gives unknown and never reads the clock without one', (t) => {
  // A fake monotonic clock that advances one millisecond per read.
  let clockMs = 0;
  const now = (): number => clockMs++;
  const result = checkLinearizability(kvModel, explosiveHistory(12), { now, budgetMs: 3 });
  t.equal(result.outcome, 'unknown');
  const p = result.partitions[0]!;
  t.same([p.outcome, p.outcome === 'unknown' ? p.reason : ''], ['unknown', 'time-budget']);
  t.ok(p.steps > 0 && p.steps < 1_000_000, 'stopped mid-search by the clock, not the cap');
  // Later partitions are not started once the budget is gone.
  clockMs = 0;
  const twoKeys = [done(1, 0, 1, put('x', 'a')), done(1, 2, 3, put('y', 'b'))];
  const spent = checkLinearizability(kvModel, twoKeys, { now, budgetMs: 0 });
  t.same(
    spent.partitions.map((x) => [x.name, x.outcome, x.steps]),
    [
      ['x', 'unknown', 0],
      ['y', 'unknown', 0],
    ],
  );
  const noClock = (): number => {
    throw new Error('the clock was read without a time budget');
  };
  t.equal(checkLinearizability(kvModel, twoKeys, { now: noClock }).outcome, 'ok');
  t.end();
});

t.test('a wide window of unknown appends is settled within the default cap', (t) => {
  const result = checkLinearizability(kvModel, explosiveHistory(8));
  t.equal(result.outcome, 'illegal', describeCheckResult(kvModel, result));
  t.end();
});

t.test('malformed histories and options are rejected with every violation', (t) => {
  const bad: KvOp[] = [
    { clientId: 1, input: put('x', 'a'), output: null, call: Number.NaN, ret: 1 },
    { clientId: 1, input: put('x', 'a'), output: null, call: 5, ret: 4 },
    { clientId: 1, input: get('x'), call: 5, ret: 6 },
    { clientId: 1, input: get('x'), output: null, call: 5, ret: Number.NaN },
  ];
  t.throws(() => check(bad), {
    constructor: ValidationError,
    code: 'CHAOS_INVALID_HISTORY',
    violations: [
      { field: 'history[0].call', reason: 'call must be a finite number' },
      { field: 'history[1].ret', reason: 'ret must not be before call' },
      {
        field: 'history[2].output',
        reason: 'output is required for a completed operation (finite ret)',
      },
      {
        field: 'history[3].ret',
        reason: 'ret must be a finite number, or UNKNOWN_RETURN for an unknown outcome',
      },
    ],
  });
  t.throws(() => compileCheckOptions({ budgetMs: 10, partitionStepsMax: 0 }), {
    code: 'CHAOS_INVALID_CHECK_OPTIONS',
    violations: [
      { field: 'now', reason: 'now is required when budgetMs is finite' },
      { field: 'partitionStepsMax', reason: 'partitionStepsMax must be a positive integer' },
    ],
  });
  t.throws(() => compileCheckOptions({ budgetMs: -1, now: () => 0 }), {
    code: 'CHAOS_INVALID_CHECK_OPTIONS',
    violations: [{ field: 'budgetMs' }],
  });
  t.same(compileCheckOptions(), {
    now: undefined,
    budgetMs: Number.POSITIVE_INFINITY,
    partitionStepsMax: 1_000_000,
  });
  t.end();
});

t.test('a partition function that loses operations is a programming error', (t) => {
  const lossy: Model<KvState, KvInput, KvOutput> = {
    ...kvModel,
    partition: (history) => [{ name: 'first', history: history.slice(0, 1) }],
  };
  const history = [done(1, 0, 1, put('x', 'a')), done(1, 2, 3, put('y', 'b'))];
  t.throws(() => checkLinearizability(lossy, history), AssertionError);
  t.end();
});

t.test('a model without partition checks the whole history as one', (t) => {
  // A counter: inputs are increments (output ignored) or reads (output = value).
  type CounterInput = { kind: 'add'; amount: number } | { kind: 'read' };
  const counter: Model<number, CounterInput, number> = {
    init: () => 0,
    step: (state, input, output) =>
      input.kind === 'add'
        ? { ok: true, next: state + input.amount }
        : { ok: output === state, next: state },
    stepUnobserved: (state, input) => (input.kind === 'add' ? state + input.amount : state),
    equal: (a, b) => a === b,
    hash: (state) => state,
    describeOperation: (input, output) =>
      input.kind === 'add' ? `add(${input.amount})` : `read -> ${output ?? '?'}`,
    describeState: (state) => String(state),
  };
  const history: Operation<CounterInput, number>[] = [
    { clientId: 1, input: { kind: 'add', amount: 2 }, output: 0, call: 0, ret: 3 },
    { clientId: 2, input: { kind: 'add', amount: 5 }, output: 0, call: 1, ret: 2 },
    { clientId: 3, input: { kind: 'read' }, output: 5, call: 1, ret: 4 },
    { clientId: 3, input: { kind: 'read' }, output: 7, call: 5, ret: 6 },
  ];
  const result = checkLinearizability(counter, history);
  t.equal(result.outcome, 'ok');
  t.same(
    result.partitions.map((p) => p.name),
    ['all'],
  );
  const wrong = [
    ...history,
    { clientId: 4, input: { kind: 'read' as const }, output: 2, call: 7, ret: 8 },
  ];
  const bad = checkLinearizability(counter, wrong);
  t.equal(bad.outcome, 'illegal');
  t.match(describeCheckResult(counter, bad), /#4 client 4: read -> 2 @\[7, 8\]: illegal/);
  t.end();
});

/** The whole store as one state, so the brute force also checks that partitioning is sound. */
type Store = ReadonlyMap<string, KvState>;
const storeModel: Model<Store, KvInput, KvOutput> = {
  init: () => new Map(),
  step: (state, input, output) => {
    const r = kvModel.step(state.get(input.key) ?? null, input, output);
    return { ok: r.ok, next: new Map(state).set(input.key, r.next) };
  },
  stepUnobserved: (state, input) =>
    new Map(state).set(input.key, kvModel.stepUnobserved(state.get(input.key) ?? null, input)),
  // The brute force neither caches nor describes states.
  equal: () => false,
  hash: () => 0,
  describeOperation: kvModel.describeOperation,
  describeState: () => '',
};

// --- Differential test against brute force ------------------------------------------------------

/**
 * The definition, directly: some order of all completed operations plus any subset of the
 * unknown ones, in which an operation that returned before another was called comes first,
 * and which the model accepts step by step. Exponential; fine for a handful of operations.
 */
function isLinearizableByBruteForce<State, Input, Output>(
  model: Model<State, Input, Output>,
  history: readonly Operation<Input, Output>[],
): boolean {
  const placed = history.map(() => false);
  const completedCount = history.filter((op) => !isOutcomeUnknown(op)).length;
  const canGoNext = (i: number): boolean =>
    history.every((other, j) => placed[j] || j === i || !(other.ret < history[i]!.call));
  const search = (state: State, completedPlaced: number): boolean => {
    if (completedPlaced === completedCount) return true;
    for (let i = 0; i < history.length; i++) {
      if (placed[i] || !canGoNext(i)) continue;
      const op = history[i]!;
      const unknown = isOutcomeUnknown(op);
      const result = unknown
        ? { ok: true, next: model.stepUnobserved(state, op.input) }
        : model.step(state, op.input, op.output!);
      if (!result.ok) continue;
      placed[i] = true;
      const found = search(result.next, completedPlaced + (unknown ? 0 : 1));
      placed[i] = false;
      if (found) return true;
    }
    return false;
  };
  return search(model.init(), 0);
}

/** Checks a witness against the definition: complete, in real-time order, accepted by the model. */
function isValidWitness(
  history: readonly KvOp[],
  partitions: readonly PartitionResult<KvState, KvInput, KvOutput>[],
): boolean {
  for (const p of partitions) {
    if (p.outcome !== 'ok') return false;
    const order = p.linearization;
    const members = new Set(order);
    const completed = history.flatMap((op, i) =>
      op.input.key === p.name && !isOutcomeUnknown(op) ? [i] : [],
    );
    if (!completed.every((i) => members.has(i))) return false;
    for (let a = 0; a < order.length; a++) {
      for (let b = a + 1; b < order.length; b++) {
        if (history[order[b]!]!.ret < history[order[a]!]!.call) return false;
      }
    }
    let state = kvModel.init();
    for (const i of order) {
      const op = history[i]!;
      if (isOutcomeUnknown(op)) state = kvModel.stepUnobserved(state, op.input);
      else {
        const r = kvModel.step(state, op.input, op.output!);
        if (!r.ok) return false;
        state = r.next;
      }
    }
  }
  return true;
}

interface HistoryShape {
  readonly clientCount: number;
  readonly opsPerClient: number;
  readonly keys: readonly string[];
  readonly unknownChance: number;
  readonly corruptChance: number;
}

/** What a client sees from an operation that took effect in state `before`. */
function observedOutput(input: KvInput, before: KvState): KvOutput {
  switch (input.op) {
    case 'get':
      return before;
    case 'cas':
      return before === input.expect;
    case 'put':
    case 'append':
      return null;
  }
}

/**
 * Closed-loop clients on integer ticks (so equal timestamps happen). Each operation takes effect
 * at a random instant inside its interval, which makes the history linearizable; then, with
 * `corruptChance`, one read or cas result is falsified, which usually (not always) breaks it.
 * An unknown-outcome operation takes effect or not with even odds, and its client is retired.
 */
function randomHistory(rand: SeededRand, shape: HistoryShape): KvOp[] {
  const values = ['a', 'b', 'c'];
  const drafts: { op: KvOp; point: number; takesEffect: boolean }[] = [];
  let nextClientId = 0;
  for (let c = 0; c < shape.clientCount; c++) {
    let clientId = nextClientId++;
    let time = rand.int(3);
    for (let k = 0; k < shape.opsPerClient; k++) {
      const key = shape.keys[rand.int(shape.keys.length)]!;
      const value = values[rand.int(values.length)]!;
      const kinds: KvInput[] = [
        put(key, value),
        get(key),
        cas(key, rand.chance(0.2) ? null : values[rand.int(values.length)]!, value),
        append(key, value),
      ];
      const input = kinds[rand.int(kinds.length)]!;
      const call = time;
      const ret = call + rand.int(4);
      const unknown = rand.chance(shape.unknownChance);
      const op: KvOp = unknown ? info(clientId, call, input) : done(clientId, call, ret, input);
      drafts.push({
        op,
        point: call + rand.float() * (ret - call),
        takesEffect: !unknown || rand.chance(0.5),
      });
      if (unknown) clientId = nextClientId++;
      time = ret + rand.int(3);
    }
  }
  // Apply the effective operations at their instants to learn the true outputs.
  const store = new Map<string, KvState>();
  const history: KvOp[] = [];
  for (const d of [...drafts].sort((x, y) => x.point - y.point)) {
    if (!d.takesEffect) continue;
    const before = store.get(d.op.input.key) ?? null;
    const next = kvModel.stepUnobserved(before, d.op.input);
    store.set(d.op.input.key, next);
    if (isOutcomeUnknown(d.op)) continue;
    d.op = { ...d.op, output: observedOutput(d.op.input, before) };
  }
  for (const d of drafts) history.push(d.op);
  const falsifiable = history.flatMap((op, i) =>
    !isOutcomeUnknown(op) && (op.input.op === 'get' || op.input.op === 'cas') ? [i] : [],
  );
  if (falsifiable.length > 0 && rand.chance(shape.corruptChance)) {
    const i = falsifiable[rand.int(falsifiable.length)]!;
    const op = history[i]!;
    const output: KvOutput =
      op.input.op === 'cas' ? op.output !== true : [null, 'a', 'b', 'c', 'ab', 'ba'][rand.int(6)]!;
    history[i] = { ...op, output };
  }
  return history;
}

/** JSON has no Infinity; keep unknown returns visible in failure messages. */
const showInfinity = (_key: string, value: unknown): unknown =>
  value === UNKNOWN_RETURN ? 'Infinity' : value;

t.test('agrees with a brute-force checker on small random histories', (t) => {
  const rand = new SeededRand(0x11ea5);
  const counts = { ok: 0, illegal: 0 };
  const mismatches: string[] = [];
  for (let round = 0; round < 1500; round++) {
    const history = randomHistory(rand, {
      clientCount: 1 + rand.int(4),
      opsPerClient: 1 + rand.int(3),
      keys: rand.chance(0.7) ? ['x'] : ['x', 'y'],
      unknownChance: 0.2,
      corruptChance: 0.5,
    });
    if (history.length > 8) continue;
    const result = check(history);
    const expected = isLinearizableByBruteForce(storeModel, history);
    // With every state hashing alike, the cache must still tell states apart by equal().
    const colliding = checkLinearizability({ ...kvModel, hash: () => 0 }, history).outcome;
    counts[result.outcome === 'ok' ? 'ok' : 'illegal']++;
    const agrees =
      result.outcome === (expected ? 'ok' : 'illegal') &&
      colliding === result.outcome &&
      (!expected || isValidWitness(history, result.partitions));
    if (!agrees && mismatches.length < 3) {
      mismatches.push(
        `round ${round}: brute force says ${expected}\n${JSON.stringify(history, showInfinity)}\n` +
          describeCheckResult(kvModel, result),
      );
    }
  }
  t.same(mismatches, [], 'no disagreement');
  t.ok(
    counts.ok > 300 && counts.illegal > 300,
    `both outcomes well covered: ${JSON.stringify(counts)}`,
  );
  t.end();
});

t.test('a long linearizable history with many clients is accepted within the default cap', (t) => {
  const rand = new SeededRand(2024);
  const history = randomHistory(rand, {
    clientCount: 8,
    opsPerClient: 60,
    keys: ['x', 'y', 'z'],
    unknownChance: 0.02,
    corruptChance: 0,
  });
  const result = check(history);
  t.equal(result.outcome, 'ok', describeCheckResult(kvModel, result));
  t.ok(isValidWitness(history, result.partitions), 'each witness satisfies the definition');
  t.end();
});
