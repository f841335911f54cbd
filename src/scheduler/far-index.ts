/**
 * The timing wheel's ordered index of keys beyond its horizon: a binary min-heap on (due, key)
 * kept in two parallel arrays rather than one object per item. A replica holds one entry per
 * job whose next slot is far away (most of them, with hourly and daily schedules), and an item
 * object with its boxed due time cost about 64 bytes where these arrays cost 16: the due times
 * sit unboxed in a double array.
 */
export class FarIndex {
  private readonly keys: string[] = [];
  private readonly dues: number[] = [];

  get size(): number {
    return this.keys.length;
  }

  /** The earliest due time, or undefined when empty. */
  peekDue(): number | undefined {
    return this.dues[0];
  }

  push(key: string, dueMs: number): void {
    this.keys.push(key);
    this.dues.push(dueMs);
    this.up(this.keys.length - 1);
  }

  /** Removes the earliest entry; call only when size > 0. */
  pop(): { key: string; dueMs: number } {
    const key = this.keys[0]!;
    const dueMs = this.dues[0]!;
    const lastKey = this.keys.pop()!;
    const lastDue = this.dues.pop()!;
    if (this.keys.length > 0) {
      this.keys[0] = lastKey;
      this.dues[0] = lastDue;
      this.down(0);
    }
    return { key, dueMs };
  }

  clear(): void {
    this.keys.length = 0;
    this.dues.length = 0;
  }

  /** Calls `f` for every entry, in no particular order. */
  forEach(f: (key: string, dueMs: number) => void): void {
    for (let i = 0; i < this.keys.length; i++) f(this.keys[i]!, this.dues[i]!);
  }

  private less(i: number, j: number): boolean {
    const a = this.dues[i]!;
    const b = this.dues[j]!;
    return a < b || (a === b && this.keys[i]! < this.keys[j]!);
  }

  private swap(i: number, j: number): void {
    const k = this.keys[i]!;
    this.keys[i] = this.keys[j]!;
    this.keys[j] = k;
    const d = this.dues[i]!;
    this.dues[i] = this.dues[j]!;
    this.dues[j] = d;
  }

  private up(i: number): void {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  private down(i: number): void {
    const n = this.keys.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.less(l, m)) m = l;
      if (r < n && this.less(r, m)) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}
