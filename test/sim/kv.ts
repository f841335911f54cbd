/**
 * The simulator's replicated state machine: a tiny key-value store with put, append and
 * compare-and-set, driven by simulated clients. Commands are JSON so traces stay readable.
 */
import type { Entry } from '../../src/raft/messages.js';
import type { ReplicatedApp } from './sim-node.js';

export type KvCommand =
  | { op: 'put'; key: string; value: string; opId: number }
  | { op: 'append'; key: string; value: string; opId: number }
  | { op: 'cas'; key: string; expect: string | null; value: string; opId: number };

export type KvResult = { ok: true } | { ok: boolean; cas: true };

const enc = new TextEncoder();
const dec = new TextDecoder();

export function encodeCommand(c: KvCommand): Uint8Array {
  return enc.encode(JSON.stringify(c));
}

export function decodeCommand(data: Uint8Array): KvCommand {
  return JSON.parse(dec.decode(data)) as KvCommand;
}

export class KvStore implements ReplicatedApp {
  readonly data = new Map<string, string>();

  applyEntry(e: Entry): boolean {
    return this.apply(decodeCommand(e.data));
  }

  read(key: string): string | null {
    return this.get(key);
  }

  restoreFrom(data: Uint8Array): void {
    this.data.clear();
    for (const [k, v] of KvStore.restore(data).data) this.data.set(k, v);
  }

  apply(c: KvCommand): boolean {
    switch (c.op) {
      case 'put':
        this.data.set(c.key, c.value);
        return true;
      case 'append':
        this.data.set(c.key, (this.data.get(c.key) ?? '') + c.value);
        return true;
      case 'cas': {
        const cur = this.data.get(c.key) ?? null;
        if (cur !== c.expect) return false;
        this.data.set(c.key, c.value);
        return true;
      }
    }
  }

  get(key: string): string | null {
    return this.data.get(key) ?? null;
  }

  snapshot(): Uint8Array {
    return enc.encode(JSON.stringify([...this.data.entries()].sort()));
  }

  static restore(data: Uint8Array): KvStore {
    const kv = new KvStore();
    if (data.byteLength === 0) return kv;
    for (const [k, v] of JSON.parse(dec.decode(data)) as [string, string][]) kv.data.set(k, v);
    return kv;
  }
}
