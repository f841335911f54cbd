/**
 * Feeds the simulator's client history to the linearizability checker: definite failures are
 * left out (they had no effect), unknown outcomes may take effect at any point after their call.
 * The step cap keeps the check deterministic, so a seed's verdict never depends on machine speed.
 */
import {
  checkLinearizability,
  describeCheckResult,
  kvModel,
  UNKNOWN_RETURN,
  type KvInput,
  type KvOutput,
  type Operation,
} from '../../chaos/checkers/linearizability.js';
import type { HistoryOp } from './cluster-sim.js';

export interface HistoryVerdict {
  readonly outcome: 'ok' | 'illegal' | 'unknown';
  readonly operations: number;
  readonly detail: string;
}

export function toOperations(history: readonly HistoryOp[]): Operation<KvInput, KvOutput>[] {
  const ops: Operation<KvInput, KvOutput>[] = [];
  for (const h of history) {
    if (h.status === 'fail' || (h.status === 'pending' && h.input.op === 'get')) continue;
    const input: KvInput =
      h.input.op === 'get'
        ? { op: 'get', key: h.key }
        : h.input.op === 'cas'
          ? { op: 'cas', key: h.key, expect: h.input.expect, value: h.input.value }
          : { op: h.input.op, key: h.key, value: h.input.value };
    if (h.status === 'ok') {
      ops.push({
        clientId: h.clientId,
        input,
        output: h.output as KvOutput,
        call: h.call,
        ret: h.ret,
      });
    } else {
      ops.push({ clientId: h.clientId, input, call: h.call, ret: UNKNOWN_RETURN });
    }
  }
  return ops;
}

export function checkSimHistory(history: readonly HistoryOp[]): HistoryVerdict {
  const ops = toOperations(history);
  const result = checkLinearizability(kvModel, ops, { partitionStepsMax: 2_000_000 });
  return {
    outcome: result.outcome,
    operations: ops.length,
    detail: result.outcome === 'ok' ? '' : describeCheckResult(kvModel, result),
  };
}
