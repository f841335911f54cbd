/**
 * A simulator's trace: every line goes into a running SHA-256 (a seed's fingerprint, compared
 * across replays), and the readable ones into a bounded tail for the failure report.
 */
import { createHash, type Hash } from 'node:crypto';

export class TraceLog {
  private readonly hash: Hash = createHash('sha256');
  private readonly lines: string[] = [];

  constructor(private readonly tailMax: number) {}

  /** One event at virtual time `nowMs`; `keep` false hashes it but leaves it out of the tail. */
  add(nowMs: number, who: string, line: string, keep: boolean): void {
    const text = `${nowMs.toFixed(3)} ${who} ${line}`;
    this.hash.update(text);
    this.hash.update('\n');
    if (!keep) return;
    this.lines.push(text);
    if (this.lines.length > this.tailMax) this.lines.shift();
  }

  tail(): string[] {
    return this.lines.slice();
  }

  /** The hash of every line so far; call once, at the end of the run. */
  digest(): string {
    return this.hash.digest('hex');
  }
}
