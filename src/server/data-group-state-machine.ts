/**
 * The state machine of a data group: the scheduler (jobs, runs, the DLQ) and, beside it, the
 * test-only key-value state the real-process tests and the replication benchmark write. An
 * entry's first byte says which one it is for: scheduler commands start with the codec's version
 * byte, key-value puts with their own tag (kv-state-machine.ts).
 */
import { assert } from '../base/assert.js';
import { CODEC_VERSION, decode, encode } from '../base/codec.js';
import type { GroupStateMachine } from '../multiraft/group-replica.js';
import type { Entry } from '../raft/messages.js';
import { SchedulerStateMachine } from '../scheduler/state-machine.js';
import { KvStateMachine } from './kv-state-machine.js';

export class DataGroupStateMachine implements GroupStateMachine {
  readonly kv = new KvStateMachine();
  readonly scheduler = new SchedulerStateMachine();
  /** Called after a snapshot replaced the state (derived indexes must be rebuilt). */
  onRestore: (() => void) | undefined;

  apply(entry: Entry): unknown {
    if (entry.data[0] === CODEC_VERSION) return this.scheduler.apply(entry);
    return this.kv.apply(entry);
  }

  snapshot(): Uint8Array {
    return encode({ v: 1, kv: this.kv.snapshot(), scheduler: this.scheduler.snapshot() });
  }

  restore(data: Uint8Array): void {
    const s = decode(data) as { v: number; kv: Uint8Array; scheduler: Uint8Array };
    // Snapshots are written by this module only; another version is a bug or a newer build.
    assert(s.v === 1, `unknown data group snapshot version ${s.v}`);
    this.kv.restore(s.kv);
    this.scheduler.restore(s.scheduler);
    this.onRestore?.();
  }
}
