/**
 * Shared test data for the scheduler tests: a default job spec and a seeded, well-formed (but
 * not always applicable) stream of commands over a few jobs.
 */
import { SeededRand } from '../../../src/base/rand.js';
import {
  packCreates,
  type AttemptResultCommand,
  type CreateJobCommand,
  type SchedulerCommand,
} from '../../../src/scheduler/commands.js';
import { TOKENS_PER_TERM } from '../../../src/scheduler/fencing.js';
import type { JobSpec } from '../../../src/scheduler/model.js';

export const MIN = 60_000;
export const T0 = Date.UTC(2026, 0, 1);

export function spec(over: Partial<JobSpec> = {}): JobSpec {
  return {
    tenant: 'acme',
    name: 'report',
    schedule: '* * * * *',
    timezone: 'UTC',
    anchorMs: undefined,
    target: { url: 'http://127.0.0.1:9/hook', headers: {} },
    payload: '{}',
    delivery: 'at_least_once',
    retry: {
      maxAttempts: 3,
      initialBackoffMs: 1000,
      maxBackoffMs: 60_000,
      multiplier: 2,
      maxAgeMs: 3600_000,
    },
    attemptDeadlineMs: 10_000,
    misfire: { policy: 'fire_once', fireAllCap: 10, catchUpWindowMs: 3600_000 },
    overlap: { policy: 'allow', bufferCap: 0 },
    priority: 1,
    startAtMs: undefined,
    endAtMs: undefined,
    remainingFires: undefined,
    ...over,
  };
}

/** A random but well-formed command stream over a few jobs. */
export function randomCommands(seed: number, count: number): SchedulerCommand[] {
  const r = new SeededRand(seed);
  const out: SchedulerCommand[] = [];
  const next = new Map<string, number>();
  let now = T0;
  const term = 1 + r.int(5);
  for (let i = 0; i < count; i++) {
    now += r.int(30_000);
    const jobId = `j${r.int(4)}`;
    const roll = r.int(10);
    const planned = next.get(jobId);
    if (roll === 0 || planned === undefined) {
      const create: CreateJobCommand = {
        op: 'create-job',
        atMs: now,
        jobId,
        spec: spec({
          delivery: r.chance(0.5) ? 'at_most_once' : 'at_least_once',
          // Two jobs with an overlap limit, by id rather than by a draw (see miss-runs below).
          ...(jobId === 'j1' || jobId === 'j3'
            ? { overlap: { policy: 'skip', bufferCap: 10, maxConcurrency: jobId === 'j1' ? 2 : 5 } }
            : {}),
        }),
        nextFireAtMs: now + MIN,
        requestId: r.chance(0.3) ? `rq${r.int(5)}` : undefined,
      };
      // Bulk registration's entry, too (one job: the stream's job ids are few).
      out.push(r.chance(0.3) ? packCreates([create])[0]! : create);
      next.set(jobId, now + MIN);
    } else if (roll <= 4) {
      out.push({
        op: 'fire-intents',
        atMs: now,
        term,
        intents: [
          {
            jobId,
            expectedNextFireAtMs: planned,
            slots: [planned],
            notFired: r.chance(0.2)
              ? [{ slotMs: planned - 7, status: 'SKIPPED', reason: 'overlap' }]
              : [],
            nextFireAtMs: planned + MIN,
          },
        ],
      });
      next.set(jobId, planned + MIN);
    } else if (roll === 5) {
      out.push({
        op: 'attempt-started',
        atMs: now,
        term,
        fireId: `${jobId}:${planned - MIN}`,
        attempt: 1,
      });
    } else if (roll === 6) {
      const result = (slot: number): AttemptResultCommand => ({
        op: 'attempt-result',
        atMs: now,
        fireId: `${jobId}:${slot}`,
        attempt: 1 + r.int(2),
        token: term * TOKENS_PER_TERM + r.int(9),
        outcome: (['success', 'retry', 'fail'] as const)[r.int(3)]!,
        statusCode: 500,
        durationMs: 3,
        error: undefined,
        responseExcerpt: undefined,
        retryAtMs: now + 1000,
      });
      const pick = r.int(3);
      if (pick === 0) out.push(result(planned - MIN));
      else if (pick === 1)
        out.push({
          op: 'attempt-results',
          atMs: now,
          results: [result(planned - MIN), result(planned - 2 * MIN)],
        });
      else
        out.push({
          op: 'miss-runs',
          atMs: now,
          // Every other one a SKIPPED run of a full job (chosen without a draw, so that the
          // stream stays what the seeds gave before).
          runs: [
            (planned / MIN) % 2 === 0
              ? { fireId: `${jobId}:${planned - MIN}`, reason: 'run_in_flight', status: 'SKIPPED' }
              : { fireId: `${jobId}:${planned - MIN}`, reason: 'skip_policy' },
          ],
        });
    } else if (roll === 7) {
      const bulk = r.int(8);
      if (bulk < 2) {
        // A bulk change of the tenant's jobs (every job here is acme's).
        const action = (['pause', 'resume', 'delete'] as const)[r.int(3)]!;
        out.push({
          op: 'tenant-jobs',
          atMs: now,
          tenant: r.chance(0.8) ? 'acme' : 'other',
          action,
          resumes:
            action === 'resume'
              ? [...next].map(([id, at]) => ({ jobId: id, nextFireAtMs: at }))
              : [],
        });
      } else
        out.push(
          r.chance(0.5)
            ? { op: 'pause-job', atMs: now, jobId }
            : { op: 'resume-job', atMs: now, jobId, nextFireAtMs: planned },
        );
    } else if (roll === 8) {
      out.push({ op: 'replay-run', atMs: now, fireId: `${jobId}:${planned - MIN}` });
    } else {
      out.push(
        r.chance(0.2)
          ? { op: 'delete-job', atMs: now, jobId }
          : { op: 'trigger-job', atMs: now, jobId, slotMs: now },
      );
    }
  }
  return out;
}

/**
 * The naive oracle the due-time structures are checked against (timing wheel, planning index):
 * a map of key → due time, scanned and sorted on every advance.
 */
export class DueOracle {
  readonly due = new Map<string, number>();
  advance(now: number): { key: string; dueMs: number }[] {
    const out = [...this.due.entries()]
      .filter(([, d]) => d <= now)
      .map(([key, dueMs]) => ({ key, dueMs }))
      .sort((a, b) => a.dueMs - b.dueMs || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    for (const it of out) this.due.delete(it.key);
    return out;
  }
}
