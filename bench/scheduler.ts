/**
 * `npm run bench:scheduler`: figures, never assertions.
 *
 * 1. In one process: how many fires per second the dispatcher plans (intents) and hands out
 *    (deliveries), with the state machine applying its own proposals; no I/O.
 * 2. A spike through a real 3-process cluster: `--jobs` one-off jobs (default 20,000; try
 *    `--jobs 40000`) all due in the same second, delivered to a local sink process that records
 *    each receipt. Printed: lag from the slot to receipt (p50 / p99 / max) and the time until the
 *    last fire, next to the ceiling measured in the same run: a bare undici Pool sending the
 *    same number of requests (same size, same headers) to the same sink, all issued at once,
 *    just before the spike and again just after it (the ratios are to the mean of the two),
 *    and the same requests sent from 3 processes at once (as the 3 nodes send). Before the
 *    measured spike, `--warmup` jobs (default 5,000; 0: none) fire in a spike of their own on
 *    the fresh cluster, and the bare clients send as many requests first, so that both sides
 *    are measured with V8's optimized code, as in a scheduler that has been firing for a while.
 *    `--leaders-on n1` first moves every data group's leadership to that node (TransferLeader),
 *    so that one process sends every fire, as the one-process bare client does.
 */
import { parseArgs } from 'node:util';
import { describeMachine, fmt, machineContext } from './figures.js';
import { runSpike } from './spike.js';
import { SeededRand } from '../src/base/rand.js';
import { GroupDispatcher } from '../src/scheduler/dispatcher.js';
import type { JobSpec } from '../src/scheduler/model.js';
import { SchedulerStateMachine } from '../src/scheduler/state-machine.js';
import { planRetry } from '../src/delivery/backoff.js';
import { compileJobSpec } from '../src/api/job-spec.js';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '20000' },
    groups: { type: 'string', default: '18' },
    'plan-jobs': { type: 'string', default: '200000' },
    warmup: { type: 'string', default: '5000' },
    'skip-cluster': { type: 'boolean', default: false },
    'leaders-on': { type: 'string' },
  },
});
const JOBS = Number(values.jobs);
const GROUPS = Number(values.groups);
const PLAN_JOBS = Number(values['plan-jobs']);

const gc = (globalThis as { gc?: () => void }).gc;
const gcNote = gc ? '' : '; run with --expose-gc for exact figures';

/** Heap in use after a full collection (when the process was started with --expose-gc). */
function settledHeap(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

// ---------------------------------------------------------------------------------------
// 1. In-process planning and dispatch

function inProcess(): void {
  const T = Date.UTC(2026, 0, 1, 12, 0, 0);
  const spec: JobSpec = compileJobSpec(
    {
      tenant: 'acme',
      name: 'x',
      schedule: `at 2026-01-01T12:00:00Z`,
      target: { url: 'http://127.0.0.1:9/h' },
    },
    T - 60_000,
  ).spec;
  const heapAtStart = settledHeap();
  const sm = new SchedulerStateMachine();
  for (let i = 0; i < PLAN_JOBS; i++) {
    sm.applyCommand({
      op: 'create-job',
      atMs: T - 60_000,
      jobId: `j${i}`,
      spec,
      nextFireAtMs: T,
      requestId: undefined,
    });
  }
  const rand = new SeededRand(1);
  const d = new GroupDispatcher(sm, {
    startMs: T - 60_000,
    retryAt: (job, attempt, slot, now, ra) => planRetry(job.retry, attempt, slot, now, ra, rand),
  });
  const leader = { term: 1, leaseValid: true, caughtUp: true };
  const heapJobs = settledHeap() - heapAtStart;
  let t0 = performance.now();
  let planned = 0;
  for (let now = T - 2900; planned < PLAN_JOBS; now += 10) {
    const s = d.step(now, leader);
    for (const p of s.proposals) {
      sm.applyCommand(p);
      if (p.op === 'fire-intents') planned += p.intents.length;
      d.proposalSettled(p, 'committed', 1);
    }
    d.afterApply();
  }
  const planMs = performance.now() - t0;
  t0 = performance.now();
  let handed = 0;
  const orders = [];
  for (let now = T; handed < PLAN_JOBS; now += 10) {
    const s = d.step(now, leader);
    handed += s.deliveries.length;
    orders.push(...s.deliveries);
  }
  const dispatchMs = performance.now() - t0;
  t0 = performance.now();
  for (const o of orders)
    d.attemptDone(
      o,
      { outcome: 'success', statusCode: 200, durationMs: 3, isProvablyUndelivered: false },
      T + 50,
    );
  const s = d.step(T + 50, leader);
  for (const p of s.proposals) sm.applyCommand(p);
  d.afterApply();
  const resultMs = performance.now() - t0;
  const heapAll = settledHeap() - heapAtStart;
  console.log(`in-process, ${fmt(PLAN_JOBS)} jobs due in the same second:`);
  console.log(
    `  plan (intents proposed+applied)   ${fmt((planned / planMs) * 1000).padStart(12)} fires/s  (${planMs.toFixed(0)} ms)`,
  );
  console.log(
    `  dispatch (orders handed out)      ${fmt((handed / dispatchMs) * 1000).padStart(12)} fires/s  (${dispatchMs.toFixed(0)} ms)`,
  );
  console.log(
    `  results (proposed+applied)        ${fmt((handed / resultMs) * 1000).padStart(12)} fires/s  (${resultMs.toFixed(0)} ms)`,
  );
  console.log(
    `  heap per job (this replica, after GC${gcNote}): ${fmt(heapJobs / PLAN_JOBS)} B registered, ` +
      `${fmt(heapAll / PLAN_JOBS)} B with its run and dispatcher indexes`,
  );
}

console.log(`machine: ${describeMachine(machineContext())}`);
inProcess();
if (!values['skip-cluster'])
  await runSpike({
    jobs: JOBS,
    groups: GROUPS,
    warmup: Number(values.warmup),
    nodeFlags: (process.env['BENCH_NODE_FLAGS'] ?? '').split(' ').filter((a) => a !== ''),
    trace: process.env['BENCH_TRACE'] === '1',
    leadersOn: values['leaders-on'],
  });
