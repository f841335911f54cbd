/**
 * The meta group's split commands: a data group's hash range cut in two, recorded in two steps
 * so that whoever drives it after a crash (any meta leader) knows where it stands:
 * - begin-split: the group G will give the upper half [mid, end) of its range to a new group C
 *   (the id is chosen here: one above every group id ever used). From then on G takes no
 *   replica move, and routing still sends the whole range to G;
 * - finish-split: G has committed the split entry in its own log (every replica of G stopped
 *   owning [mid, end) at that index and created C's replica from its own state there). G's range
 *   becomes [start, mid), C is recorded with [mid, end) on G's replicas, and both epochs are
 *   above G's old one, so routing caches that still name the old layout refresh.
 * Pure functions over the meta state's maps, called from MetaStateMachine.apply.
 */
import type { NodeId } from '../raft/messages.js';

export interface SplitGroup {
  readonly id: number;
  readonly start: number;
  readonly end: number;
  readonly replicas: readonly NodeId[];
  readonly epoch: number;
  readonly splitFrom?: number | undefined;
}

export interface SplitRecord {
  readonly groupId: number;
  readonly childId: number;
  /** First hash of the child's range; the parent keeps [start, mid). */
  readonly mid: number;
  /** The parent's range when the split began (the split entry carries it). */
  readonly start: number;
  readonly end: number;
}

export type SplitCommand =
  | { readonly op: 'begin-split'; readonly groupId: number; readonly mid?: number | undefined }
  | { readonly op: 'finish-split'; readonly groupId: number; readonly childId: number };

export type SplitResult =
  { ok: true; split?: SplitRecord } | { ok: false; code: string; reason: string };

export interface SplitState {
  readonly groups: Map<number, SplitGroup>;
  readonly moves: ReadonlyMap<number, unknown>;
  readonly splits: Map<number, SplitRecord>;
  /** The highest group id ever used (ids are never reused: a node may still hold old data). */
  maxGroupId: number;
}

/** A range narrower than this is not split further (it could not be balanced anyway). */
export const MIN_SPLIT_RANGE = 2;

export function isSplitCommand(c: { readonly op: string }): c is SplitCommand {
  return c.op === 'begin-split' || c.op === 'finish-split';
}

function refuse(code: string, reason: string): SplitResult {
  return { ok: false, code, reason };
}

export function applySplitCommand(s: SplitState, c: SplitCommand): SplitResult {
  return c.op === 'begin-split' ? beginSplit(s, c.groupId, c.mid) : finishSplit(s, c);
}

function beginSplit(s: SplitState, groupId: number, wantMid: number | undefined): SplitResult {
  const g = s.groups.get(groupId);
  if (!g) return refuse('META_NO_GROUP', `no group ${groupId}`);
  const pending = s.splits.get(groupId);
  // The same split asked again (a retry after an unknown outcome, a second trigger).
  if (pending) return { ok: true, split: pending };
  if (s.moves.has(groupId))
    return refuse(
      'META_MOVE_IN_FLIGHT',
      `group ${groupId} is moving a replica; split it once the move is done`,
    );
  if (g.end - g.start < MIN_SPLIT_RANGE)
    return refuse('META_SPLIT_INVALID', `group ${groupId}'s range is too small to split`);
  const mid = wantMid ?? g.start + Math.floor((g.end - g.start) / 2);
  if (!Number.isSafeInteger(mid) || mid <= g.start || mid >= g.end)
    return refuse(
      'META_SPLIT_INVALID',
      `split point ${mid} is not inside group ${groupId}'s range [${g.start}, ${g.end})`,
    );
  const split: SplitRecord = {
    groupId,
    childId: s.maxGroupId + 1,
    mid,
    start: g.start,
    end: g.end,
  };
  // The child's id is taken now, so that two splits in flight never pick the same one.
  s.maxGroupId = split.childId;
  s.splits.set(groupId, split);
  return { ok: true, split };
}

function finishSplit(s: SplitState, c: Extract<SplitCommand, { op: 'finish-split' }>): SplitResult {
  const split = s.splits.get(c.groupId);
  const g = s.groups.get(c.groupId);
  if (!split || !g || split.childId !== c.childId) {
    // Finished already (a retry): the child is recorded.
    if (s.groups.has(c.childId)) return { ok: true };
    return refuse('META_NO_SPLIT', `group ${c.groupId} has no split to group ${c.childId}`);
  }
  const epoch = g.epoch + 1;
  s.groups.set(c.groupId, { ...g, end: split.mid, epoch });
  s.groups.set(split.childId, {
    id: split.childId,
    start: split.mid,
    end: split.end,
    replicas: [...g.replicas],
    epoch,
    splitFrom: c.groupId,
  });
  s.splits.delete(c.groupId);
  return { ok: true };
}

/** First byte of a split entry in the parent group's log: 'S' (data-group-state-machine.ts). */
export const SPLIT_TAG = 0x53;

/** The split entry: at its index the parent stops owning [mid, end) and the child begins. */
export interface SplitEntry {
  readonly childId: number;
  /** The parent's range as the meta group recorded it when the split began. */
  readonly start: number;
  readonly mid: number;
  readonly end: number;
}

const encoder = new TextEncoder();

export function encodeSplitEntry(s: SplitEntry): Uint8Array {
  const json = encoder.encode(JSON.stringify(s));
  const out = new Uint8Array(json.length + 1);
  out[0] = SPLIT_TAG;
  out.set(json, 1);
  return out;
}
