/**
 * A test-only key-value state machine for data groups, used by the real-process tests and the
 * replication benchmark until the scheduler state machine takes the data groups over. Commands
 * are msgpack `{ k, v }` puts; reads go through ReadIndex on the node.
 */
import { pack, unpack } from 'msgpackr';
import type { GroupStateMachine } from '../multiraft/group-replica.js';
import type { Entry } from '../raft/messages.js';

export interface KvPut {
  readonly k: string;
  readonly v: string;
}

export function encodeKvPut(put: KvPut): Uint8Array {
  return pack(put);
}

export class KvStateMachine implements GroupStateMachine {
  readonly data = new Map<string, string>();
  applied = 0;

  apply(entry: Entry): true {
    const put = unpack(entry.data) as KvPut;
    this.data.set(put.k, put.v);
    this.applied++;
    return true;
  }

  get(key: string): string | undefined {
    return this.data.get(key);
  }

  snapshot(): Uint8Array {
    return pack([...this.data.entries()]);
  }

  restore(data: Uint8Array): void {
    this.data.clear();
    for (const [k, v] of unpack(data) as [string, string][]) this.data.set(k, v);
  }
}
