/**
 * The legal moves of a run's status, as one table. Any other move is a bug in the state
 * machine (every replica would make it, so it would not diverge, but it would break what the
 * checkers hold the cluster to), hence an assertion.
 */
import { assertionFailed } from '../base/assert.js';
import type { RunStatus } from './model.js';

const LEGAL: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  // Attempt started (at-most-once), succeeded, retried later, or ended without firing (MISSED:
  // planned before an outage, its slot passed while nobody could deliver it; SKIPPED: paused,
  // or its job had its overlap policy's maxConcurrency runs in flight when its turn came).
  // RUNNING: the receiver accepted it (202) to complete it later.
  SCHEDULED: [
    'DISPATCHED',
    'RUNNING',
    'SUCCEEDED',
    'SCHEDULED',
    'DEAD',
    'CANCELLED',
    'SKIPPED',
    'MISSED',
  ],
  DISPATCHED: ['RUNNING', 'SUCCEEDED', 'SCHEDULED', 'DEAD', 'UNKNOWN', 'SKIPPED'],
  // Completed (CompleteRun), or its completion deadline passed (retried or DEAD), or SKIPPED: a
  // retry of a paused job.
  RUNNING: ['SUCCEEDED', 'SCHEDULED', 'DEAD', 'SKIPPED'],
  // Only a replay leaves a terminal status.
  DEAD: ['SCHEDULED'],
  SUCCEEDED: [],
  CANCELLED: [],
  SKIPPED: [],
  MISSED: [],
  UNKNOWN: [],
};

export function canTransition(from: RunStatus, to: RunStatus): boolean {
  return LEGAL[from].includes(to);
}

export function assertTransition(from: RunStatus, to: RunStatus): void {
  if (!canTransition(from, to)) assertionFailed(`illegal run transition ${from} → ${to}`);
}
