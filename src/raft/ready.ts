/**
 * Ready: everything the core wants the runtime to do, handed out in one batch.
 *
 * The persist-before-send contract. For each Ready, the runtime must, in this order:
 * 1. Persist `snapshot` (if any), then `entries` (writing entry i discards any stored entries
 *    with index >= i), then `hardState` (if any) — durably (fsync) whenever `mustSync` is true —
 *    before anything below. A vote or an append acknowledgement sent from state that a crash
 *    could lose would let a node vote twice in a term or a leader count a lost entry.
 * 2. Send `messages`. They may depend on step 1 (acknowledgements, vote grants).
 * 3. Restore the state machine from `snapshot` (if any), then apply `committedEntries` in
 *    order. Entries here may also be in `entries` of this same Ready: step 1 made them durable.
 * 4. Deliver `readStates`: a read with index i may be served once applied >= i.
 * 5. Call advance(). Until then the core must not be stepped, ticked or proposed to.
 */
import type { Entry, HardState, Message, NodeId, Snapshot } from './messages.js';

export type Role = 'follower' | 'pre-candidate' | 'candidate' | 'leader';

export interface SoftState {
  readonly lead: NodeId;
  readonly role: Role;
}

/** Why a ReadIndex request failed; 'timeout': a follower's forwarded request went unanswered. */
export type ReadFailure = 'not-leader' | 'leadership-lost' | 'too-many-reads' | 'timeout';

/** The outcome of a ReadIndex request, identified by the caller's request id. */
export type ReadState =
  | { readonly requestId: number; readonly ok: true; readonly index: number }
  | { readonly requestId: number; readonly ok: false; readonly reason: ReadFailure };

export interface Ready {
  readonly softState: SoftState | undefined;
  readonly hardState: HardState | undefined;
  readonly entries: readonly Entry[];
  readonly snapshot: Snapshot | undefined;
  readonly committedEntries: readonly Entry[];
  readonly messages: readonly Message[];
  readonly readStates: readonly ReadState[];
  /** Whether step 1 must be synced to disk (new entries, or a changed term or vote). */
  readonly mustSync: boolean;
}

export function isReadyEmpty(rd: Ready): boolean {
  return (
    rd.softState === undefined &&
    rd.hardState === undefined &&
    rd.entries.length === 0 &&
    rd.snapshot === undefined &&
    rd.committedEntries.length === 0 &&
    rd.messages.length === 0 &&
    rd.readStates.length === 0
  );
}
