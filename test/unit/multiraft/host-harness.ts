// What the host tests share: a clock only the test moves, a state machine whose commands move
// it (so that a "slow" apply or a stall is exactly as long as the test says), and a host of
// node n1 on a fresh LevelDB store, removed at the test's end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { Clock } from '../../../src/base/clock.js';
import { SeededRand } from '../../../src/base/rand.js';
import type { GroupStateMachine } from '../../../src/multiraft/group-replica.js';
import { MultiRaftHost, type HostOptions } from '../../../src/multiraft/host.js';
import type { CompiledRaftConfig } from '../../../src/raft/config.js';
import type { Entry } from '../../../src/raft/messages.js';
import { NodeStore } from '../../../src/storage/node-store.js';

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

/**
 * Node n1's host (not started) on a fresh store, its groups' state machines SlowApply on a
 * ManualClock; no snapshots.
 */
export async function manualHost(
  t: Test,
  raft: CompiledRaftConfig,
  tickMs: number,
  seed: number,
  extra: Partial<Pick<HostOptions, 'slowTurnMs' | 'applySliceMs' | 'yieldToLoop'>>,
): Promise<{ host: MultiRaftHost; clock: ManualClock }> {
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-host-'));
  const store = await NodeStore.open(dir);
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const clock = new ManualClock();
  const host = new MultiRaftHost({
    nodeId: 'n1',
    store,
    clock,
    rand: new SeededRand(seed),
    raft,
    tickMs,
    snapshotEveryEntries: 1_000_000,
    snapshotEveryBytes: 1 << 30,
    makeStateMachine: () => new SlowApply(clock),
    onFatal: (err) => t.fail(`loop died: ${String(err)}`),
    ...extra,
  });
  return { host, clock };
}
