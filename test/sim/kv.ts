/**
 * The simulator's replicated state machine: a tiny key-value store with put, append and
 * compare-and-set, driven by simulated clients. Commands are JSON so traces stay readable.
 */
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

export class KvStore {
  readonly data = new Map<string, string>();

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
