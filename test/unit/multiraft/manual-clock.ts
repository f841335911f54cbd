// What the host tests share: a clock only the test moves, and a state machine whose commands
// move it, so that a "slow" apply or a stall is exactly as long as the test says.
import type { Clock } from '../../../src/base/clock.js';
import type { GroupStateMachine } from '../../../src/multiraft/group-replica.js';
import type { Entry } from '../../../src/raft/messages.js';

export class ManualClock implements Clock {
  ms = 1_000_000;
  nowMs(): number {
    return this.ms;
  }
  monotonicMs(): number {
    return this.ms;
  }
}

/** Applying an entry whose first byte is n moves the clock n × 10 ms: a slow command. */
export class SlowApply implements GroupStateMachine {
  constructor(private readonly clock: ManualClock) {}
  apply(entry: Entry): unknown {
    this.clock.ms += (entry.data[0] ?? 0) * 10;
    return entry.data[0];
  }
  snapshot(): Uint8Array {
    return new Uint8Array();
  }
  restore(): void {}
}
