/**
 * Bootstrapping a new group. The initial membership is written as committed conf-change entries
 * at the start of the log (term 1), not as hidden snapshot metadata: a replica added later that
 * replays the log from index 1 then rebuilds exactly the same configuration history.
 */
import { assert } from '../base/assert.js';
import { encodeConfChange } from './conf-change.js';
import type { Entry, HardState, NodeId } from './messages.js';

export function bootstrapEntries(
  voters: readonly NodeId[],
  learners: readonly NodeId[] = [],
): Entry[] {
  assert(voters.length > 0, 'a group needs at least one voter');
  const ids = [
    ...voters.map((id) => ({ id, type: 'add-voter' as const })),
    ...learners.map((id) => ({ id, type: 'add-learner' as const })),
  ];
  return ids.map(({ id, type }, i) => ({
    term: 1,
    index: i + 1,
    type: 'conf-change',
    data: encodeConfChange({ transition: 'simple', changes: [{ type, nodeId: id }] }),
  }));
}

/** The hard state that goes with bootstrapEntries: term 1, everything committed. */
export function bootstrapHardState(entries: readonly Entry[]): HardState {
  return { term: 1, vote: '', commit: entries.length };
}
