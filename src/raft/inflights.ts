/**
 * The append messages sent to one follower and not yet acknowledged, bounded by count and by
 * entry bytes. A FIFO of (last index, bytes): acknowledgements free every message up to an index.
 */
export class Inflights {
  private readonly lastIndexes: number[] = [];
  private readonly sizes: number[] = [];
  private head = 0;
  private bytes = 0;

  constructor(
    readonly maxMsgs: number,
    /** 0 means no byte bound. */
    readonly maxBytes: number,
  ) {}

  get count(): number {
    return this.lastIndexes.length - this.head;
  }

  get inflightBytes(): number {
    return this.bytes;
  }

  add(lastIndex: number, bytes: number): void {
    this.lastIndexes.push(lastIndex);
    this.sizes.push(bytes);
    this.bytes += bytes;
  }

  /** Frees every message whose last index is <= `index`. */
  freeLE(index: number): void {
    while (this.head < this.lastIndexes.length && this.lastIndexes[this.head]! <= index) {
      this.bytes -= this.sizes[this.head]!;
      this.head++;
    }
    // Compact the arrays once the dead prefix dominates, keeping add() amortised O(1).
    if (this.head > 64 && this.head * 2 > this.lastIndexes.length) {
      this.lastIndexes.splice(0, this.head);
      this.sizes.splice(0, this.head);
      this.head = 0;
    }
  }

  isFull(): boolean {
    return this.count >= this.maxMsgs || (this.maxBytes > 0 && this.bytes >= this.maxBytes);
  }

  reset(): void {
    this.lastIndexes.length = 0;
    this.sizes.length = 0;
    this.head = 0;
    this.bytes = 0;
  }
}
