/**
 * What the chaos run's two receivers share, the webhook sink (chaos/sink.ts) and the pull-based
 * worker (chaos/worker.ts): their common flags, and the decision taken for each delivery they
 * receive — fence it by term (chaos/term-fence.ts), draw its seeded answer, and record it in the
 * history before answering, so that a receiver killed after its answer still has the receipt.
 */
import type { Command } from 'commander';
import { performance } from 'node:perf_hooks';
import { SeededRand } from '../src/base/rand.js';
import type { DeliveryRecord } from './history/format.js';
import { HistoryWriter } from './history/jsonl.js';
import { TermFence } from './term-fence.js';

export interface ReceiverFlags {
  readonly history: string;
  readonly startedAt: string;
  readonly seed: string;
  readonly slowFraction: string;
  readonly errorFraction: string;
  readonly slowMs: string;
}

/** A delivery as received, before its answer is drawn. */
export type Receipt = Omit<DeliveryRecord, 'type' | 't' | 'answer' | 'status' | 'heldMs'>;

/** The answer drawn for a delivery, with the HTTP status the record says it got. */
export type Verdict =
  | { readonly answer: 'stale'; readonly status: 409 }
  | { readonly answer: '5xx'; readonly status: 503 }
  | { readonly answer: 'slow'; readonly status: 200; readonly heldMs: number }
  | { readonly answer: '2xx'; readonly status: 200 };

/** The flags of ReceiverFlags, added to a receiver's command line. */
export function addReceiverOptions(command: Command, held: string, failed: string): Command {
  return command
    .requiredOption('--history <file>', 'history file (JSON lines) to append delivery records to')
    .requiredOption('--started-at <epochMs>', "the run's meta.startedAtEpochMs (time base of `t`)")
    .option('--seed <n>', 'seed of the answer draws', '1')
    .option('--slow-fraction <f>', `fraction of ${held}`, '0.02')
    .option('--error-fraction <f>', `fraction of ${failed}`, '0.03')
    .option('--slow-ms <n>', 'mean hold of a slow answer, ms', '1500');
}

export class Receiver {
  private readonly startedAt: number;
  private readonly slowFraction: number;
  private readonly errorFraction: number;
  private readonly slowMs: number;
  private readonly rand: SeededRand;
  private readonly history: HistoryWriter;
  private readonly fence = new TermFence();

  /** Checks the flags (`fail` says what is wrong and exits) and opens the history file. */
  constructor(flags: ReceiverFlags, fail: (message: string) => never) {
    const fraction = (text: string, flag: string): number => {
      const n = Number(text);
      if (!Number.isFinite(n) || n < 0 || n > 1) fail(`${flag} must be in [0, 1], got '${text}'`);
      return n;
    };
    this.startedAt = Number(flags.startedAt);
    if (!Number.isFinite(this.startedAt) || this.startedAt <= 0)
      fail('--started-at must be epoch ms');
    this.slowFraction = fraction(flags.slowFraction, '--slow-fraction');
    this.errorFraction = fraction(flags.errorFraction, '--error-fraction');
    this.slowMs = Number(flags.slowMs);
    if (!Number.isSafeInteger(this.slowMs) || this.slowMs < 0)
      fail('--slow-ms must be a whole number ≥ 0');
    this.rand = new SeededRand(Number(flags.seed) >>> 0);
    this.history = new HistoryWriter(flags.history);
  }

  /** Driver time now: ms since the run started, on the true clock. */
  now(): number {
    return performance.timeOrigin + performance.now() - this.startedAt;
  }

  /**
   * Fences, draws and records one delivery received at `t` (driver ms; default now). A stale
   * token is refused before any draw, so the seeded answers do not depend on how many were stale.
   */
  receive(receipt: Receipt, t: number = this.now()): Verdict {
    let verdict: Verdict;
    if (!this.fence.admit(receipt.jobId, receipt.token)) verdict = { answer: 'stale', status: 409 };
    else {
      const draw = this.rand.float();
      if (draw < this.errorFraction) verdict = { answer: '5xx', status: 503 };
      else if (draw < this.errorFraction + this.slowFraction)
        verdict = {
          answer: 'slow',
          status: 200,
          heldMs: Math.round(this.slowMs * (0.5 + this.rand.float())),
        };
      else verdict = { answer: '2xx', status: 200 };
    }
    const { answer, status } = verdict;
    // Written with the hold it will get: a receiver killed during the hold still has it.
    const heldMs = verdict.answer === 'slow' ? { heldMs: verdict.heldMs } : {};
    this.history.append({ type: 'delivery', t, ...receipt, answer, status, ...heldMs });
    return verdict;
  }

  close(): void {
    this.history.close();
  }
}
