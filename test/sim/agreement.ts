/**
 * Replica agreement for the scheduler simulation: replicas that have applied the same prefix of
 * the log hold byte-identical state-machine snapshots, and every index a replica keeps beside
 * its state (runs by job, the dead-letter set, the job table's id index, the dispatch and
 * planning wheels) equals what a full scan of that state derives. A bug here diverges replicas
 * silently: nothing goes wrong until the follower becomes leader.
 */
import { decode } from '../../src/base/codec.js';
import type { GroupDispatcher } from '../../src/scheduler/dispatcher.js';
import type { SchedulerStateMachine } from '../../src/scheduler/state-machine.js';
import { isWaitingForUpstream } from '../../src/scheduler/model.js';

/** The first snapshot seen at each applied index, and who made it. */
export class SnapshotLedger {
  private readonly byIndex = new Map<number, { node: string; data: Uint8Array }>();
  /** Comparisons made (for the run's counts). */
  compared = 0;

  get size(): number {
    return this.byIndex.size;
  }

  has(index: number): boolean {
    return this.byIndex.has(index);
  }

  /** Records the first snapshot at `index`; later ones must match it byte for byte. */
  offer(index: number, node: string, data: Uint8Array): string | undefined {
    const first = this.byIndex.get(index);
    if (!first) {
      this.byIndex.set(index, { node, data });
      return undefined;
    }
    this.compared++;
    if (Buffer.from(first.data).equals(Buffer.from(data))) return undefined;
    return `replicas disagree at applied index ${index}: ${first.node} and ${node} hold different state (${describeSnapshotDiff(first.data, data)})`;
  }
}

/** Where two scheduler snapshots differ, as a short readable path. */
export function describeSnapshotDiff(a: Uint8Array, b: Uint8Array): string {
  const path = firstDifference(decode(a), decode(b), '');
  return path === undefined ? 'same content, different encoding' : `first difference at ${path}`;
}

function firstDifference(a: unknown, b: unknown, at: string): string | undefined {
  if (Object.is(a, b)) return undefined;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null)
    return `${at || '.'}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
  if (Array.isArray(a) !== Array.isArray(b)) return `${at}: array vs object`;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  for (const k of new Set([...ka, ...kb])) {
    const d = firstDifference(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      `${at}.${k}`,
    );
    if (d !== undefined) return d;
  }
  if (ka.length !== kb.length) return `${at}: ${ka.length} vs ${kb.length} keys`;
  return undefined;
}

/**
 * What the dispatcher's wheels hold that a scan of the state machine would not put there, or
 * lack where it would. On a replica holding leader state a due entry may have left the wheel
 * for its leader's queues (advance() hands each out once); elsewhere the wheels must be exact.
 */
export function auditDispatcher(sm: SchedulerStateMachine, d: GroupDispatcher): string[] {
  const leading = d.leaderTerm !== undefined;
  const out: string[] = [];
  const wheel = d.index.dispatch;
  let held = 0;
  for (const [fireId, run] of sm.runs) {
    const want =
      run.status === 'SCHEDULED' &&
      sm.jobs.pausedOf(run.jobId) === false &&
      !isWaitingForUpstream(run);
    const due = wheel.dueAt(fireId);
    if (due !== undefined) held++;
    if (!want) {
      if (due !== undefined)
        out.push(`dispatch wheel holds ${fireId} (${run.status}) at ${due}; a scan would not`);
    } else if (due === undefined) {
      if (!leading) out.push(`dispatch wheel lacks ${fireId} due at ${run.dueAtMs}`);
    } else if (due !== run.dueAtMs) {
      out.push(`dispatch wheel has ${fireId} at ${due}, its run is due at ${run.dueAtMs}`);
    }
  }
  if (wheel.size !== held)
    out.push(`dispatch wheel holds ${wheel.size - held} keys that are no run of the state`);
  for (const id of sm.jobs.keys()) {
    const next = sm.jobs.nextFireOrMissing(id);
    const due = d.index.planning.dueAt(id);
    if (typeof next !== 'number') {
      if (due !== undefined) out.push(`planning holds ${id} at ${due}; it has no next slot`);
    } else if (due !== undefined && due !== next - d.lookAheadMs) {
      out.push(`planning has ${id} at ${due}, its next slot ${next} says ${next - d.lookAheadMs}`);
    } else if (due === undefined && !leading) {
      out.push(`planning lacks ${id} (next slot ${next})`);
    }
  }
  return out;
}
