/**
 * Values a hot path observes (one per delivery attempt), handed to a prom-client histogram in
 * bulk: at scrape time, from the histogram's collect(), or when the buffer is full. During a
 * spike that keeps the histogram's label lookup and bucket search out of the drain; the total
 * work is the same, done when the node is idle. A scrape sees every value observed before it.
 *
 * Each value may carry a small integer key (a group id, say) that the flush hands back with it,
 * so that a labelled histogram is fed without storing a label object per observation.
 */
export class ObservationBuffer {
  private readonly values: Float64Array;
  private readonly keys: Uint32Array;
  private count = 0;

  constructor(
    private readonly observe: (value: number, key: number) => void,
    capacity = 16_384,
  ) {
    this.values = new Float64Array(capacity);
    this.keys = new Uint32Array(capacity);
  }

  add(value: number, key = 0): void {
    this.keys[this.count] = key;
    this.values[this.count++] = value;
    if (this.count === this.values.length) this.flush();
  }

  flush(): void {
    const n = this.count;
    this.count = 0;
    for (let i = 0; i < n; i++) this.observe(this.values[i]!, this.keys[i]!);
  }
}

/** Counts by a small fixed set of label values, added to a prom-client counter in bulk. */
export class CountBuffer<K extends string> {
  private readonly counts = new Map<K, number>();

  constructor(private readonly inc: (key: K, by: number) => void) {}

  add(key: K): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  flush(): void {
    for (const [key, n] of this.counts) if (n > 0) this.inc(key, n);
    this.counts.clear();
  }
}
