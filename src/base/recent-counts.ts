/**
 * Counts by key over whole seconds: what was counted in the last complete second is a rate
 * that usage reports can show without keeping a history. Two maps, whatever the traffic; a key
 * idle for two seconds is gone. Pure: time comes in as an argument.
 */
export class RecentCounts {
  private second = Number.NEGATIVE_INFINITY;
  private current = new Map<string, number>();
  private previous = new Map<string, number>();

  add(key: string, nowMs: number, n = 1): void {
    this.roll(nowMs);
    this.current.set(key, (this.current.get(key) ?? 0) + n);
  }

  /** What was counted for `key` in the last complete second before `nowMs`. */
  lastSecond(key: string, nowMs: number): number {
    this.roll(nowMs);
    return this.previous.get(key) ?? 0;
  }

  private roll(nowMs: number): void {
    const second = Math.floor(nowMs / 1000);
    if (second <= this.second) return;
    this.previous = second === this.second + 1 ? this.current : new Map<string, number>();
    this.current = new Map<string, number>();
    this.second = second;
  }
}
