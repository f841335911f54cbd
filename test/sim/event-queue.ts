/**
 * The simulator's agenda: events ordered by virtual time, ties broken by insertion order so a
 * run is a pure function of its seed.
 */
import { MinHeap } from '../../src/base/min-heap.js';

export interface Scheduled<T> {
  readonly at: number;
  readonly seq: number;
  readonly event: T;
}

export class EventQueue<T> {
  private readonly heap = new MinHeap<Scheduled<T>>(
    (a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq),
  );
  private seq = 0;

  get size(): number {
    return this.heap.size;
  }

  push(at: number, event: T): void {
    this.heap.push({ at, seq: this.seq++, event });
  }

  pop(): Scheduled<T> | undefined {
    return this.heap.pop();
  }

  peekTime(): number | undefined {
    return this.heap.peek()?.at;
  }
}
