/**
 * The simulator's agenda: events ordered by virtual time, ties broken by insertion order so a
 * run is a pure function of its seed.
 */
export interface Scheduled<T> {
  readonly at: number;
  readonly seq: number;
  readonly event: T;
}

export class EventQueue<T> {
  private heap: Scheduled<T>[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(at: number, event: T): void {
    const item = { at, seq: this.seq++, event };
    const h = this.heap;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  pop(): Scheduled<T> | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && less(h[l]!, h[m]!)) m = l;
        if (r < h.length && less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }

  peekTime(): number | undefined {
    return this.heap[0]?.at;
  }
}

function less<T>(a: Scheduled<T>, b: Scheduled<T>): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
