/**
 * Bounded run state: a recurring job whose every run dies keeps the replicated state bounded,
 * by its tenant's retention (the leader's sweep proposes purge-runs) and, with no sweep at all,
 * by the state machine's own cap on DEAD runs per job.
 */
import t from 'tap';
import type { SchedulerCommand } from '../../../src/scheduler/commands.js';
import { GroupDispatcher } from '../../../src/scheduler/dispatcher.js';
import { DEFAULT_RUN_RETENTION, type RunRetention } from '../../../src/placement/run-retention.js';
import { SchedulerStateMachine } from '../../../src/scheduler/state-machine.js';
import { T0, spec } from './fixtures.js';

const JOB = 'acme/poison';

/**
 * One leader replica whose proposals commit at once: the job fires every second for `slots`
 * seconds and every attempt fails for good. Returns the state's size as it went.
 */
function runPoisonJob(
  slots: number,
  retention: RunRetention,
): {
  sm: SchedulerStateMachine;
  samples: { slot: number; runs: number; dead: number; bytes: number }[];
} {
  const sm = new SchedulerStateMachine();
  const d = new GroupDispatcher(sm, {
    startMs: T0,
    lookAheadMs: 3000,
    retentionOf: (tenant) => {
      if (tenant !== 'acme') throw new Error(`retention asked for ${tenant}`);
      return retention;
    },
    retryAt: () => undefined,
  });
  const apply = (c: SchedulerCommand): void => {
    sm.applyCommand(c);
    d.afterApply();
  };
  apply({
    op: 'create-job',
    atMs: T0,
    jobId: JOB,
    spec: spec({ schedule: 'every 1s', retry: { ...spec().retry, maxAttempts: 1 } }),
    nextFireAtMs: T0 + 1000,
    requestId: undefined,
  });
  const samples: { slot: number; runs: number; dead: number; bytes: number }[] = [];
  const lead = { term: 1, leaseValid: true, caughtUp: true };
  for (let ms = T0; ms <= T0 + slots * 1000; ms += 250) {
    const s = d.step(ms, lead);
    for (const c of s.proposals) {
      apply(c);
      d.proposalSettled(c, 'committed', 1);
    }
    for (const o of s.deliveries)
      d.attemptDone(
        o,
        { outcome: 'fail', statusCode: 400, durationMs: 3, isProvablyUndelivered: false },
        ms,
      );
    if ((ms - T0) % 500_000 === 0)
      samples.push({
        slot: (ms - T0) / 1000,
        runs: sm.runs.size,
        dead: sm.dead.size,
        bytes: sm.snapshot().length,
      });
  }
  return { sm, samples };
}

t.test('a job that always fails keeps the state bounded by its tenant’s retention', (t) => {
  const retention = { ...DEFAULT_RUN_RETENTION, deadPerJob: 20, historyPerJob: 10 };
  const { sm, samples } = runPoisonJob(5000, retention);
  const dead = [...sm.runsOf(JOB)].filter((r) => r.status === 'DEAD');
  t.ok(dead.length >= 20, `${dead.length} DEAD runs kept: the newest are still there to replay`);
  // The sweep runs once a second and the job dies once a second: one or two beyond the count.
  for (const s of samples)
    t.ok(s.dead <= 22 && s.runs <= 30, `after ${s.slot} slots: ${s.runs} runs, ${s.dead} dead`);
  const sizes = samples.slice(1).map((s) => s.bytes);
  t.ok(
    Math.max(...sizes) - Math.min(...sizes) < 512,
    `snapshot size flat from slot 500 to 5,000: ${sizes.join(', ')} bytes`,
  );
  const newestDead = Math.max(...dead.map((r) => r.slotMs));
  t.ok(T0 + 5000_000 - newestDead <= 2000, 'the runs kept are the newest to die');
  t.end();
});

t.test('dead runs older than the retention age leave the DLQ', (t) => {
  const retention = { ...DEFAULT_RUN_RETENTION, deadPerJob: 1000, deadMaxAgeMs: 60_000 };
  const { sm } = runPoisonJob(600, retention);
  const oldest = Math.min(...[...sm.dead].map((id) => sm.runs.get(id)!.finishedAtMs!));
  t.ok(T0 + 600_000 - oldest <= 62_000, `the oldest dead run died ${T0 + 600_000 - oldest} ms ago`);
  t.ok(sm.dead.size <= 62, `${sm.dead.size} dead runs: one a second for a minute`);
  t.end();
});

t.test('with no sweep the state machine caps DEAD runs per job itself', (t) => {
  const sm = new SchedulerStateMachine();
  sm.applyCommand({
    op: 'create-job',
    atMs: T0,
    jobId: JOB,
    spec: spec({ schedule: 'every 1s', retry: { ...spec().retry, maxAttempts: 1 } }),
    nextFireAtMs: T0 + 1000,
    requestId: undefined,
  });
  const max = sm.limits.deadRunsPerJobMax;
  for (let i = 1; i <= max + 500; i++) {
    const slot = T0 + i * 1000;
    sm.applyCommand({
      op: 'fire-intents',
      atMs: slot - 1000,
      term: 1,
      intents: [
        {
          jobId: JOB,
          expectedNextFireAtMs: slot,
          slots: [slot],
          notFired: [],
          nextFireAtMs: slot + 1000,
        },
      ],
    });
    sm.applyCommand({
      op: 'attempt-result',
      atMs: slot + 5,
      fireId: `${JOB}:${slot}`,
      attempt: 1,
      token: 2 ** 24 + i,
      outcome: 'fail',
      statusCode: 400,
      durationMs: 3,
      error: undefined,
      responseExcerpt: undefined,
      retryAtMs: undefined,
    });
  }
  t.ok(sm.dead.size <= max + 1, `${sm.dead.size} DEAD runs after ${max + 500} deaths (cap ${max})`);
  t.ok(sm.runs.size <= max + 1, `${sm.runs.size} runs kept`);
  t.strictSame(sm.auditIndexes(), [], 'indexes agree with the runs');
  t.end();
});

t.test('purge-runs drops finished runs only', (t) => {
  const sm = new SchedulerStateMachine();
  sm.applyCommand({
    op: 'create-job',
    atMs: T0,
    jobId: JOB,
    spec: spec({ schedule: 'every 1s' }),
    nextFireAtMs: T0 + 1000,
    requestId: undefined,
  });
  sm.applyCommand({
    op: 'fire-intents',
    atMs: T0,
    term: 1,
    intents: [
      {
        jobId: JOB,
        expectedNextFireAtMs: T0 + 1000,
        slots: [T0 + 1000],
        notFired: [],
        nextFireAtMs: T0 + 2000,
      },
    ],
  });
  const fireId = `${JOB}:${T0 + 1000}`;
  sm.applyCommand({ op: 'purge-runs', atMs: T0 + 10, fireIds: [fireId, 'acme/none:1'] });
  t.equal(sm.runs.get(fireId)?.status, 'SCHEDULED', 'a run not finished is not purged');
  t.end();
});
