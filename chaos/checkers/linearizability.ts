/**
 * Linearizability checking for recorded client histories: Wing & Gong's backtracking search with
 * Lowe's memoization, laid out as Porcupine does it (anishathalye/porcupine, checker.go), plus
 * P-compositionality (Horn & Kroening): a model may split a history into parts that are checked
 * on their own, such as one part per key.
 *
 * The checker is pure so that the deterministic simulator can call it: it reads no clock and no
 * randomness, and does no I/O. Two limits keep it from hanging, because the problem is
 * NP-complete and a wide window of concurrent operations explodes the search:
 * `partitionStepsMax` (deterministic; the same history always gives the same answer) and an
 * optional wall-clock budget read through an injected `now()`. Running out of either gives
 * 'unknown', never a guess.
 *
 * Caller contract for histories:
 * - `call` and `ret` come from one monotonic clock in the test driver, never from the nodes.
 * - An operation that definitely failed and did not take effect (rejected before it was
 *   proposed) is left out of the history by the caller, as Knossos drops `fail` pairs. Only an
 *   error that guarantees no effect counts as a definite failure.
 * - An operation whose outcome is unknown (timeout, lost leader, reset connection: Jepsen's
 *   `info`) gets `ret: UNKNOWN_RETURN` (+Infinity) and no output. It may take effect at any
 *   point after its call, or never.
 */
import { assert, assertNever } from '../../src/base/assert.js';
import { ValidationError } from '../../src/base/errors.js';
import type { FieldViolation } from '../../src/base/errors.js';

export type ClientId = number | string;

/**
 * One client operation with its real-time interval. The interval is closed: an operation whose
 * call time equals another's return time overlaps it (see `buildEntryList`).
 */
export interface Operation<Input, Output> {
  /** Used only in reports; the checker does not require one operation at a time per client. */
  readonly clientId: ClientId;
  readonly input: Input;
  /** Required when `ret` is finite; ignored (and usually absent) when the outcome is unknown. */
  readonly output?: Output;
  readonly call: number;
  /** The response time, or UNKNOWN_RETURN when the client never learnt the outcome. */
  readonly ret: number;
}

/** The return time of an operation whose outcome is unknown. */
export const UNKNOWN_RETURN = Number.POSITIVE_INFINITY;

export function isOutcomeUnknown(op: { readonly ret: number }): boolean {
  return op.ret === UNKNOWN_RETURN;
}

export interface StepResult<State> {
  /** Whether the operation, with this output, is legal in the state it was applied to. */
  readonly ok: boolean;
  /** The state after the operation; ignored when `ok` is false. */
  readonly next: State;
}

/** A named sub-history, checked independently of the others. */
export interface Partition<Input, Output> {
  readonly name: string;
  /** The same operation objects as in the history given to the checker, not copies. */
  readonly history: readonly Operation<Input, Output>[];
}

/**
 * A sequential specification. States are treated as immutable values: the search keeps old ones
 * on its backtracking stack and in its cache, so `step` must return a new state, never mutate.
 * Models are deterministic (one next state per step); Porcupine's nondeterministic models are
 * not supported.
 */
export interface Model<State, Input, Output> {
  readonly init: () => State;
  /** Applies an operation whose output was observed. */
  readonly step: (state: State, input: Input, output: Output) => StepResult<State>;
  /**
   * Applies an operation whose output was never seen: it is legal in every state, and its effect
   * is what it would have done in `state` (a cas swaps only if the expectation holds).
   */
  readonly stepUnobserved: (state: State, input: Input) => State;
  /**
   * Whether an operation never changes the state. Unknown-outcome operations that are read-only
   * constrain nothing, so the checker drops them instead of widening the search with them.
   */
  readonly isReadOnly?: (input: Input) => boolean;
  readonly equal: (a: State, b: State) => boolean;
  /** Must agree with `equal`: equal states hash equally. */
  readonly hash: (state: State) => number;
  /**
   * Splits a history into parts whose operations never interact (one key each, for single-key
   * operations), returning every operation exactly once. Without it the whole history is one
   * partition named 'all'.
   */
  readonly partition?: (
    history: readonly Operation<Input, Output>[],
  ) => readonly Partition<Input, Output>[];
  /** `output` is undefined when the outcome is unknown. */
  readonly describeOperation: (input: Input, output: Output | undefined) => string;
  readonly describeState: (state: State) => string;
}

export interface CheckOptions {
  /**
   * Reads a monotonic clock in milliseconds; only called when `budgetMs` is finite, so a
   * simulator that relies on the step cap alone need not pass one.
   */
  readonly now?: () => number;
  /**
   * Wall-clock budget for the whole check. Partitions not finished in time are 'unknown'.
   * @default Infinity
   */
  readonly budgetMs?: number;
  /**
   * Search steps (list entries visited) allowed per partition before it is 'unknown'. The
   * deterministic limit: the answer does not depend on machine speed.
   * @default 1_000_000
   */
  readonly partitionStepsMax?: number;
}

export interface CompiledCheckOptions {
  readonly now: (() => number) | undefined;
  readonly budgetMs: number;
  readonly partitionStepsMax: number;
}

export type CheckOutcome = 'ok' | 'illegal' | 'unknown';

export type UnknownReason = 'step-cap' | 'time-budget';

export interface IndexedOperation<Input, Output> {
  /** Position in the history given to `checkLinearizability`. */
  readonly index: number;
  readonly operation: Operation<Input, Output>;
}

export interface PlacedOperation<State, Input, Output> extends IndexedOperation<Input, Output> {
  readonly stateAfter: State;
}

export interface Candidate<Input, Output> extends IndexedOperation<Input, Output> {
  /**
   * 'illegal': the model rejects it after the prefix. 'dead-end': legal, but every way to go on
   * from there had already failed.
   */
  readonly reason: 'illegal' | 'dead-end';
}

/** Why a partition is not linearizable, taken from the deepest dead end of the search. */
export interface Violation<State, Input, Output> {
  readonly partition: string;
  /**
   * The longest linearizable prefix the search found, in linearization order: the most
   * completed operations, then the fewest unknown-outcome ones.
   */
  readonly prefix: readonly PlacedOperation<State, Input, Output>[];
  readonly stateAfterPrefix: State;
  /**
   * The earliest-returning operation not in the prefix: it returned before anything else left
   * was invoked, so one of the candidates had to come next, and none could.
   */
  readonly blocking: IndexedOperation<Input, Output>;
  /** Every operation that real-time order allowed next; all of them failed. */
  readonly candidates: readonly Candidate<Input, Output>[];
  /** Completed operations outside the prefix (unknown-outcome ones may be dropped, so omitted). */
  readonly unplaced: readonly IndexedOperation<Input, Output>[];
}

interface PartitionSummary {
  readonly name: string;
  readonly operationCount: number;
  readonly steps: number;
}

export type PartitionResult<State, Input, Output> =
  | (PartitionSummary & {
      readonly outcome: 'ok';
      /**
       * A witness: history indexes in linearization order, ending with a completed operation.
       * Unknown-outcome operations that are absent never took effect in this witness.
       */
      readonly linearization: readonly number[];
    })
  | (PartitionSummary & {
      readonly outcome: 'illegal';
      readonly violation: Violation<State, Input, Output>;
    })
  | (PartitionSummary & { readonly outcome: 'unknown'; readonly reason: UnknownReason });

export interface CheckResult<State, Input, Output> {
  /** 'illegal' if any partition is; otherwise 'unknown' if any partition is; otherwise 'ok'. */
  readonly outcome: CheckOutcome;
  readonly partitions: readonly PartitionResult<State, Input, Output>[];
  readonly steps: number;
}

const PARTITION_STEPS_MAX_DEFAULT = 1_000_000;
/** How often the search reads the clock; a power of two minus one, used as a mask. */
const CLOCK_CHECK_MASK = 1023;

export function compileCheckOptions(options: CheckOptions = {}): CompiledCheckOptions {
  const violations: FieldViolation[] = [];
  const budgetMs = options.budgetMs ?? Number.POSITIVE_INFINITY;
  const partitionStepsMax = options.partitionStepsMax ?? PARTITION_STEPS_MAX_DEFAULT;
  if (!(typeof budgetMs === 'number' && budgetMs >= 0)) {
    violations.push({
      field: 'budgetMs',
      reason: 'budgetMs must be a non-negative number of milliseconds, or Infinity for none',
    });
  }
  if (Number.isFinite(budgetMs) && options.now === undefined) {
    violations.push({ field: 'now', reason: 'now is required when budgetMs is finite' });
  }
  if (!(Number.isSafeInteger(partitionStepsMax) && partitionStepsMax > 0)) {
    violations.push({
      field: 'partitionStepsMax',
      reason: 'partitionStepsMax must be a positive integer',
    });
  }
  if (violations.length > 0) throw new ValidationError('CHAOS_INVALID_CHECK_OPTIONS', violations);
  return Object.freeze({ now: options.now, budgetMs, partitionStepsMax });
}

/** Collects every malformed operation; histories read from JSON lines are not type-checked. */
function validateHistory<Input, Output>(history: readonly Operation<Input, Output>[]): void {
  const violations: FieldViolation[] = [];
  history.forEach((op, i) => {
    if (!(typeof op.call === 'number' && Number.isFinite(op.call))) {
      violations.push({ field: `history[${i}].call`, reason: 'call must be a finite number' });
    }
    if (!(typeof op.ret === 'number' && !Number.isNaN(op.ret) && op.ret !== -Infinity)) {
      violations.push({
        field: `history[${i}].ret`,
        reason: 'ret must be a finite number, or UNKNOWN_RETURN for an unknown outcome',
      });
    } else if (op.ret < op.call) {
      violations.push({ field: `history[${i}].ret`, reason: 'ret must not be before call' });
    }
    if (Number.isFinite(op.ret) && op.output === undefined) {
      violations.push({
        field: `history[${i}].output`,
        reason: 'output is required for a completed operation (finite ret)',
      });
    }
  });
  if (violations.length > 0) throw new ValidationError('CHAOS_INVALID_HISTORY', violations);
}

interface IndexedPartition<Input, Output> {
  readonly name: string;
  readonly ops: readonly Operation<Input, Output>[];
  /** `indexes[i]` is the history index of `ops[i]`. */
  readonly indexes: readonly number[];
}

function partitionHistory<State, Input, Output>(
  model: Model<State, Input, Output>,
  history: readonly Operation<Input, Output>[],
): IndexedPartition<Input, Output>[] {
  if (model.partition === undefined) {
    return [{ name: 'all', ops: history, indexes: history.map((_, i) => i) }];
  }
  // Reports name operations by history index, so map the returned objects back by identity.
  const positions = new Map<Operation<Input, Output>, number[]>();
  history.forEach((op, i) => {
    const list = positions.get(op);
    if (list === undefined) positions.set(op, [i]);
    else list.push(i);
  });
  let seen = 0;
  const parts = model.partition(history).map((part) => {
    const indexes = part.history.map((op) => {
      const index = positions.get(op)?.shift();
      assert(index !== undefined, 'model.partition returned an operation not in the history');
      return index;
    });
    seen += indexes.length;
    return { name: part.name, ops: part.history, indexes };
  });
  assert(seen === history.length, 'model.partition must return every operation exactly once');
  return parts;
}

/** Starts the wall-clock budget; returns a predicate that is true once it is spent. */
function startBudget(options: CompiledCheckOptions): () => boolean {
  const now = options.now;
  if (!Number.isFinite(options.budgetMs) || now === undefined) return () => false;
  const deadlineMs = now() + options.budgetMs;
  return () => now() >= deadlineMs;
}

/**
 * Checks that `history` is linearizable with respect to `model`. Throws ValidationError for a
 * malformed history or options; otherwise never throws for an illegal history.
 */
export function checkLinearizability<State, Input, Output>(
  model: Model<State, Input, Output>,
  history: readonly Operation<Input, Output>[],
  options: CheckOptions = {},
): CheckResult<State, Input, Output> {
  const compiled = compileCheckOptions(options);
  validateHistory(history);
  const isOverBudget = startBudget(compiled);
  const partitions: PartitionResult<State, Input, Output>[] = [];
  let steps = 0;
  for (const part of partitionHistory(model, history)) {
    const summary = { name: part.name, operationCount: part.ops.length };
    if (isOverBudget()) {
      partitions.push({ ...summary, steps: 0, outcome: 'unknown', reason: 'time-budget' });
      continue;
    }
    const result = checkPartition(model, part, compiled.partitionStepsMax, isOverBudget);
    steps += result.steps;
    partitions.push(result);
  }
  const outcomes = new Set(partitions.map((p) => p.outcome));
  const outcome = outcomes.has('illegal') ? 'illegal' : outcomes.has('unknown') ? 'unknown' : 'ok';
  return { outcome, partitions, steps };
}

function checkPartition<State, Input, Output>(
  model: Model<State, Input, Output>,
  part: IndexedPartition<Input, Output>,
  stepsMax: number,
  isOverBudget: () => boolean,
): PartitionResult<State, Input, Output> {
  // An unknown read may have happened or not; either way it changes nothing, so it can go.
  const kept: number[] = [];
  part.ops.forEach((op, i) => {
    if (!(isOutcomeUnknown(op) && model.isReadOnly?.(op.input) === true)) kept.push(i);
  });
  const ops = kept.map((i) => part.ops[i]!);
  const indexes = kept.map((i) => part.indexes[i]!);
  const search = new WglSearch(model, ops, stepsMax, isOverBudget);
  const found = search.run();
  const summary = { name: part.name, operationCount: part.ops.length, steps: search.steps };
  switch (found.kind) {
    case 'ok':
      return { ...summary, outcome: 'ok', linearization: found.order.map((id) => indexes[id]!) };
    case 'unknown':
      return { ...summary, outcome: 'unknown', reason: found.reason };
    case 'illegal':
      return {
        ...summary,
        outcome: 'illegal',
        violation: toViolation(model, part.name, ops, indexes, found.deadEnd),
      };
    default:
      return assertNever(found, 'search outcome');
  }
}

/** The deepest point where the search got stuck; ids are positions in the searched ops. */
interface DeadEnd<State> {
  readonly prefix: readonly number[];
  readonly completedCount: number;
  readonly state: State;
  readonly blocking: number;
  readonly candidates: readonly { readonly id: number; readonly isLegal: boolean }[];
}

type SearchOutcome<State> =
  | { readonly kind: 'ok'; readonly order: readonly number[] }
  | { readonly kind: 'illegal'; readonly deadEnd: DeadEnd<State> }
  | { readonly kind: 'unknown'; readonly reason: UnknownReason };

interface CacheEntry<State> {
  readonly linearized: Uint32Array;
  readonly state: State;
}

/** Sentinel for "no node" in the linked list. */
const NONE = -1;
/** Node 0 is the list head; entries are nodes 1..2n in time order. */
const HEAD = 0;

/** splitmix/murmur finaliser: spreads consecutive op ids over 32 bits for the set hash. */
function mix32(x: number): number {
  let h = x | 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function bitsetEqual(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * One partition's search. The history becomes a doubly linked list of call and return entries
 * in time order. The operations that may be linearized next are exactly those whose call comes
 * before the first remaining return (nothing invoked after an operation returned can precede
 * it). Linearizing one lifts its call and return out of the list; backtracking relinks them.
 * The cache holds every (linearized set, state) pair already entered: the future depends on
 * nothing else, so meeting one again means that branch is already explored (Lowe).
 */
class WglSearch<State, Input, Output> {
  steps = 0;
  private readonly next: Int32Array;
  private readonly prev: Int32Array;
  /** Operation id of each node. */
  private readonly opOf: Int32Array;
  /** For a call node, its return node; NONE for return nodes. */
  private readonly matchOf: Int32Array;
  private readonly linearized: Uint32Array;
  /** XOR of mix32(id) over the linearized set, kept incrementally (Zobrist hashing). */
  private linearizedHash = 0;
  private readonly cache = new Map<number, CacheEntry<State>[]>();
  private readonly stackNodes: number[] = [];
  private readonly stackStates: State[] = [];
  private state: State;
  private readonly completedCount: number;
  /** Completed operations not yet linearized; the search succeeds when none are left. */
  private completedLeftCount: number;
  private deadEnd: DeadEnd<State> | undefined;

  constructor(
    private readonly model: Model<State, Input, Output>,
    private readonly ops: readonly Operation<Input, Output>[],
    private readonly stepsMax: number,
    private readonly isOverBudget: () => boolean,
  ) {
    const nodeCount = 2 * ops.length + 1;
    this.next = new Int32Array(nodeCount);
    this.prev = new Int32Array(nodeCount);
    this.opOf = new Int32Array(nodeCount).fill(NONE);
    this.matchOf = new Int32Array(nodeCount).fill(NONE);
    this.linearized = new Uint32Array(Math.ceil(ops.length / 32));
    this.state = model.init();
    this.completedCount = ops.filter((op) => !isOutcomeUnknown(op)).length;
    this.completedLeftCount = this.completedCount;
    this.buildEntryList();
  }

  /**
   * Orders entries by time; at equal times calls come before returns, as in Porcupine. So
   * intervals are closed: if one operation returns at t and another is called at t, either may
   * be linearized first. That is the conservative reading of equal timestamps from a coarse
   * clock (it can only turn an "illegal" into "ok", never the reverse); a caller that knows the
   * order must record distinct times. Remaining ties go by operation id, so the search order,
   * and therefore the step count, is deterministic. Unknown returns (+Infinity) sort last.
   */
  private buildEntryList(): void {
    const entries: { time: number; isCall: boolean; id: number }[] = [];
    this.ops.forEach((op, id) => {
      entries.push({ time: op.call, isCall: true, id }, { time: op.ret, isCall: false, id });
    });
    entries.sort((a, b) => {
      if (a.time !== b.time) return a.time < b.time ? -1 : 1;
      if (a.isCall !== b.isCall) return a.isCall ? -1 : 1;
      return a.id - b.id;
    });
    const returnNodeOf = new Int32Array(this.ops.length);
    entries.forEach((e, k) => {
      if (!e.isCall) returnNodeOf[e.id] = k + 1;
    });
    entries.forEach((e, k) => {
      const node = k + 1;
      this.opOf[node] = e.id;
      if (e.isCall) this.matchOf[node] = returnNodeOf[e.id]!;
    });
    for (let node = 0; node < this.next.length; node++) {
      this.next[node] = node + 1 < this.next.length ? node + 1 : NONE;
      this.prev[node] = node - 1;
    }
  }

  run(): SearchOutcome<State> {
    let node = this.next[HEAD]!;
    // Unknown-outcome operations still unplaced at the end are taken to have never happened.
    while (this.completedLeftCount > 0) {
      if (this.steps >= this.stepsMax) return { kind: 'unknown', reason: 'step-cap' };
      this.steps++;
      if ((this.steps & CLOCK_CHECK_MASK) === 0 && this.isOverBudget()) {
        return { kind: 'unknown', reason: 'time-budget' };
      }
      if (this.matchOf[node] !== NONE) {
        node = this.tryLinearize(node);
        continue;
      }
      // A return entry: its operation is not linearized yet and nothing later may precede it.
      // Unknown returns sort after every finite one, so reaching one means nothing is left.
      assert(!isOutcomeUnknown(this.ops[this.opOf[node]!]!), 'completed operations remain');
      this.recordDeadEnd(node);
      if (this.stackNodes.length === 0) {
        assert(this.deadEnd !== undefined, 'a dead end was recorded');
        return { kind: 'illegal', deadEnd: this.deadEnd };
      }
      node = this.backtrack();
    }
    return { kind: 'ok', order: this.stackNodes.map((n) => this.opOf[n]!) };
  }

  /** Tries the call entry `node` as the next linearization point; returns the node to visit. */
  private tryLinearize(node: number): number {
    const id = this.opOf[node]!;
    const result = this.stepOp(this.state, id);
    if (!result.ok) return this.next[node]!;
    this.toggle(id);
    if (!this.cacheAdd(result.next)) {
      this.toggle(id);
      return this.next[node]!;
    }
    if (!isOutcomeUnknown(this.ops[id]!)) this.completedLeftCount--;
    this.stackNodes.push(node);
    this.stackStates.push(this.state);
    this.state = result.next;
    this.lift(node);
    return this.next[HEAD]!;
  }

  /** Undoes the newest linearization; returns the node after it, the next candidate to try. */
  private backtrack(): number {
    const node = this.stackNodes.pop()!;
    const id = this.opOf[node]!;
    this.state = this.stackStates.pop()!;
    if (!isOutcomeUnknown(this.ops[id]!)) this.completedLeftCount++;
    this.toggle(id);
    this.unlift(node);
    return this.next[node]!;
  }

  private stepOp(state: State, id: number): StepResult<State> {
    return stepOperation(this.model, state, this.ops[id]!);
  }

  private toggle(id: number): void {
    this.linearized[id >>> 5]! ^= 1 << (id & 31);
    this.linearizedHash ^= mix32(id + 1);
  }

  /** Adds (linearized set, state) to the cache; false when it was already there. */
  private cacheAdd(state: State): boolean {
    const key = (this.linearizedHash ^ mix32(this.model.hash(state) ^ 0x5bd1e995)) >>> 0;
    const bucket = this.cache.get(key);
    const entry = { linearized: this.linearized.slice(), state };
    if (bucket === undefined) {
      this.cache.set(key, [entry]);
      return true;
    }
    for (const e of bucket) {
      if (bitsetEqual(e.linearized, this.linearized) && this.model.equal(e.state, state)) {
        return false;
      }
    }
    bucket.push(entry);
    return true;
  }

  /** Unlinks a call entry and its return in O(1); both keep their own links for unlift. */
  private lift(call: number): void {
    const ret = this.matchOf[call]!;
    this.next[this.prev[call]!] = this.next[call]!;
    this.prev[this.next[call]!] = this.prev[call]!;
    this.next[this.prev[ret]!] = this.next[ret]!;
    if (this.next[ret] !== NONE) this.prev[this.next[ret]!] = this.prev[ret]!;
  }

  /** Relinks in the reverse order of lift, which is valid because lifts are undone LIFO. */
  private unlift(call: number): void {
    const ret = this.matchOf[call]!;
    this.next[this.prev[ret]!] = ret;
    if (this.next[ret] !== NONE) this.prev[this.next[ret]!] = ret;
    this.next[this.prev[call]!] = call;
    this.prev[this.next[call]!] = call;
  }

  /**
   * Keeps the dead end with the most completed operations in its prefix for the report, and
   * among those the one with the fewest unknown-outcome operations, which are noise to a reader.
   * That pair only improves, so this runs at most (completed + 1) * (unknown + 1) times.
   */
  private recordDeadEnd(returnNode: number): void {
    const completedCount = this.completedCount - this.completedLeftCount;
    const depth = this.stackNodes.length;
    const best = this.deadEnd;
    if (
      best !== undefined &&
      (completedCount < best.completedCount ||
        (completedCount === best.completedCount && depth >= best.prefix.length))
    ) {
      return;
    }
    const candidates: { id: number; isLegal: boolean }[] = [];
    for (let n = this.next[HEAD]!; n !== returnNode; n = this.next[n]!) {
      if (this.matchOf[n] === NONE) continue;
      const id = this.opOf[n]!;
      candidates.push({ id, isLegal: this.stepOp(this.state, id).ok });
    }
    this.deadEnd = {
      prefix: this.stackNodes.map((n) => this.opOf[n]!),
      completedCount,
      state: this.state,
      blocking: this.opOf[returnNode]!,
      candidates,
    };
  }
}

function stepOperation<State, Input, Output>(
  model: Model<State, Input, Output>,
  state: State,
  op: Operation<Input, Output>,
): StepResult<State> {
  if (isOutcomeUnknown(op)) return { ok: true, next: model.stepUnobserved(state, op.input) };
  // validateHistory guarantees an output on every completed operation.
  assert(op.output !== undefined, 'a completed operation has an output');
  return model.step(state, op.input, op.output);
}

function toViolation<State, Input, Output>(
  model: Model<State, Input, Output>,
  partition: string,
  ops: readonly Operation<Input, Output>[],
  indexes: readonly number[],
  deadEnd: DeadEnd<State>,
): Violation<State, Input, Output> {
  const ref = (id: number): IndexedOperation<Input, Output> => ({
    index: indexes[id]!,
    operation: ops[id]!,
  });
  // Replaying the prefix recovers the intermediate states the search did not keep.
  let state = model.init();
  const prefix = deadEnd.prefix.map((id) => {
    const result = stepOperation(model, state, ops[id]!);
    assert(result.ok, 'a prefix found by the search replays');
    state = result.next;
    return { ...ref(id), stateAfter: state };
  });
  const inPrefix = new Set(deadEnd.prefix);
  return {
    partition,
    prefix,
    stateAfterPrefix: deadEnd.state,
    blocking: ref(deadEnd.blocking),
    candidates: deadEnd.candidates.map((c) => ({
      ...ref(c.id),
      reason: c.isLegal ? 'dead-end' : 'illegal',
    })),
    unplaced: ops.flatMap((op, id) => (inPrefix.has(id) || isOutcomeUnknown(op) ? [] : [ref(id)])),
  };
}

/** One line for an operation: `#index client c: description @[call, ret]`. */
export function describeOperation<State, Input, Output>(
  model: Model<State, Input, Output>,
  ref: IndexedOperation<Input, Output>,
): string {
  const op = ref.operation;
  const isUnknown = isOutcomeUnknown(op);
  const text = model.describeOperation(op.input, isUnknown ? undefined : op.output);
  const ret = isUnknown ? 'unknown' : String(op.ret);
  return `#${ref.index} client ${op.clientId}: ${text} @[${op.call}, ${ret}]`;
}

/** A readable explanation of why a partition is not linearizable. */
export function describeViolation<State, Input, Output>(
  model: Model<State, Input, Output>,
  violation: Violation<State, Input, Output>,
): string {
  const v = violation;
  const lines = [`partition ${JSON.stringify(v.partition)} is not linearizable.`];
  const completedCount = v.prefix.filter((p) => !isOutcomeUnknown(p.operation)).length;
  lines.push(
    `Longest linearizable prefix: ${v.prefix.length} operations ` +
      `(${completedCount} of ${completedCount + v.unplaced.length} completed ones):`,
  );
  v.prefix.forEach((p, i) => {
    lines.push(
      `  ${i + 1}. ${describeOperation(model, p)}  => ${model.describeState(p.stateAfter)}`,
    );
  });
  if (v.prefix.length === 0) lines.push('  (none)');
  lines.push(
    `After it the state is ${model.describeState(v.stateAfterPrefix)}, and no operation can ` +
      `come next. ${describeOperation(model, v.blocking)} had returned before anything else ` +
      'left was called, so one of these had to be next:',
  );
  for (const c of v.candidates) {
    const why =
      c.reason === 'illegal'
        ? 'illegal in this state'
        : 'legal here, but every continuation from it fails';
    lines.push(`  ${describeOperation(model, c)}: ${why}`);
  }
  lines.push(
    `Never linearized (${v.unplaced.length} completed): ` +
      v.unplaced.map((u) => `#${u.index}`).join(', '),
  );
  return lines.join('\n');
}

const UNKNOWN_REASON_TEXT: Record<UnknownReason, string> = {
  'step-cap': 'step cap reached',
  'time-budget': 'time budget spent',
};

/** A summary line per partition followed by every violation. */
export function describeCheckResult<State, Input, Output>(
  model: Model<State, Input, Output>,
  result: CheckResult<State, Input, Output>,
): string {
  const lines = [
    `linearizability: ${result.outcome} ` +
      `(${result.partitions.length} partitions, ${result.steps} steps)`,
  ];
  const violations: string[] = [];
  for (const p of result.partitions) {
    const detail = p.outcome === 'unknown' ? `: ${UNKNOWN_REASON_TEXT[p.reason]}` : '';
    lines.push(
      `  ${JSON.stringify(p.name)}: ${p.outcome}${detail} ` +
        `(${p.operationCount} operations, ${p.steps} steps)`,
    );
    if (p.outcome === 'illegal') violations.push(describeViolation(model, p.violation));
  }
  return [lines.join('\n'), ...violations].join('\n\n');
}

// ---------------------------------------------------------------------------------------------
// Key-value register model.

export type KvInput =
  | { readonly op: 'put'; readonly key: string; readonly value: string }
  | { readonly op: 'get'; readonly key: string }
  /** `expect: null` means "only if the key is absent". */
  | {
      readonly op: 'cas';
      readonly key: string;
      readonly expect: string | null;
      readonly value: string;
    }
  /** Appends to the current value; an absent key counts as ''. */
  | { readonly op: 'append'; readonly key: string; readonly value: string };

/** get: the value read, null when absent; cas: whether it swapped; put and append: ignored. */
export type KvOutput = string | boolean | null;

/** One key's value; null when absent. Each partition holds one key. */
export type KvState = string | null;

function hashString(s: string): number {
  // FNV-1a over UTF-16 code units: cheap and well spread for short values.
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function stepKv(state: KvState, input: KvInput, output: KvOutput): StepResult<KvState> {
  switch (input.op) {
    case 'put':
      return { ok: true, next: input.value };
    case 'get':
      return { ok: output === state, next: state };
    case 'cas': {
      const swapped = state === input.expect;
      return { ok: output === swapped, next: swapped ? input.value : state };
    }
    case 'append':
      return { ok: true, next: (state ?? '') + input.value };
    default:
      return assertNever(input, 'kv input');
  }
}

function describeKvOperation(input: KvInput, output: KvOutput | undefined): string {
  const key = JSON.stringify(input.key);
  const shown = output === undefined ? ' -> ?' : '';
  switch (input.op) {
    case 'put':
      return `put(${key}, ${JSON.stringify(input.value)})${shown}`;
    case 'append':
      return `append(${key}, ${JSON.stringify(input.value)})${shown}`;
    case 'get': {
      const read = output === undefined ? '?' : output === null ? 'absent' : JSON.stringify(output);
      return `get(${key}) -> ${read}`;
    }
    case 'cas': {
      const expect = input.expect === null ? 'absent' : JSON.stringify(input.expect);
      const swapped = output === undefined ? '?' : String(output);
      return `cas(${key}, ${expect} -> ${JSON.stringify(input.value)}) -> ${swapped}`;
    }
    default:
      return assertNever(input, 'kv input');
  }
}

/** A register per key with put, get, cas and append; partitions by key, in order of first use. */
export const kvModel: Model<KvState, KvInput, KvOutput> = {
  init: () => null,
  step: stepKv,
  // An unobserved cas still swaps only when its expectation holds at its linearization point.
  stepUnobserved: (state, input) => {
    switch (input.op) {
      case 'get':
        return state;
      case 'cas':
        return state === input.expect ? input.value : state;
      case 'put':
      case 'append':
        return stepKv(state, input, null).next;
      default:
        return assertNever(input, 'kv input');
    }
  },
  isReadOnly: (input) => input.op === 'get',
  equal: (a, b) => a === b,
  hash: (state) => (state === null ? 0x9e3779b9 : hashString(state)),
  partition: (history) => {
    const byKey = new Map<string, Operation<KvInput, KvOutput>[]>();
    for (const op of history) {
      const list = byKey.get(op.input.key);
      if (list === undefined) byKey.set(op.input.key, [op]);
      else list.push(op);
    }
    return [...byKey].map(([name, ops]) => ({ name, history: ops }));
  },
  describeOperation: describeKvOperation,
  describeState: (state) => (state === null ? 'absent' : JSON.stringify(state)),
};
