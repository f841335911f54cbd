/**
 * One pass over a node's groups that starts one further each time (so no group always comes
 * last when the shared budget runs out) and may stop once a time slice has run, leaving the
 * groups it did not reach to the next pass, which starts with them. A node leads dozens of
 * groups; after a large apply each one's step can take tens of milliseconds, and a pass over
 * all of them in one piece held the event loop past half an election timeout.
 *
 * Pure: the time comes from `nowMs`, which the caller reads from its clock.
 */
export interface PassResult {
  /** Groups visited, in order, from the pass's first. */
  readonly visited: number;
  /** Whether the pass stopped before the last group (a follow-up pass should run soon). */
  readonly cut: boolean;
}

export class RotatingPass {
  /** Where the next pass starts. */
  private start = 0;
  /** The previous pass was cut: the next starts where it stopped instead of one further. */
  private resume = false;

  /**
   * Visits the `count` groups by index, from where this pass starts, calling `visit(index)`.
   * With `sliceMs`, stops after a visit once `sliceMs` has run since the pass began (at least
   * one group is always visited).
   */
  run(
    count: number,
    visit: (index: number) => void,
    nowMs: () => number,
    sliceMs?: number,
  ): PassResult {
    if (count === 0) {
      this.start = 0;
      this.resume = false;
      return { visited: 0, cut: false };
    }
    const first = this.resume ? this.start % count : (this.start + 1) % count;
    const fromMs = sliceMs === undefined ? 0 : nowMs();
    for (let i = 0; i < count; i++) {
      visit((first + i) % count);
      if (sliceMs !== undefined && i < count - 1 && nowMs() - fromMs >= sliceMs) {
        this.start = (first + i + 1) % count;
        this.resume = true;
        return { visited: i + 1, cut: true };
      }
    }
    this.start = first;
    this.resume = false;
    return { visited: count, cut: false };
  }
}
