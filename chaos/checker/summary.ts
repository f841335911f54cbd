/**
 * The report as text: a table of every check with its count and verdict, the figures (slots,
 * lag, recovery), then the examples of each violation found. Pure.
 */
import type { CheckReport } from './check-history.js';
import type { LagSummary } from './lag.js';
import { VIOLATION_KINDS, type ViolationKind } from './violations.js';

const CHECK_OF: Readonly<Record<ViolationKind, string>> = {
  'job-lost': 'a acknowledged jobs lost',
  'phantom-job': 'a phantom jobs (fired, never created)',
  'slot-without-run': 'b owed slots with no run',
  'slot-skipped-beyond-policy': 'b not fired beyond the job policy',
  'at-most-once-duplicate': 'c at-most-once slots delivered twice',
  'at-least-once-duplicate': 'd at-least-once duplicates not allowed',
  'delivery-after-cancel': 'e deliveries after an acked cancel',
  'delivery-after-pause': 'e deliveries after an acked pause',
  'job-read-not-linearizable': 'f jobs not linearizable',
  'fencing-stale-accepted': 'g stale tokens accepted by the sink',
  'slot-off-time': 'h first attempts off time outside faults',
};

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  const line = (r: readonly string[]): string =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(rows[0]!), rule, ...rows.slice(1).map(line)].join('\n');
}

function ms(v: number | null): string {
  return v === null ? '-' : v.toFixed(0);
}

function lagRow(name: string, s: LagSummary): string[] {
  return [name, String(s.count), ms(s.p50Ms), ms(s.p99Ms), ms(s.maxMs)];
}

export function renderSummary(report: CheckReport, faultsShownMax = 20): string {
  const out: string[] = [];
  out.push(
    `chaos check: ${report.verdict.toUpperCase()}  seed ${report.seed}  ` +
      `${report.counts.records} records, ${report.counts.operations} operations, ` +
      `${report.counts.deliveries} deliveries, ${report.counts.jobs} jobs, ${report.counts.faults} faults`,
  );
  const t = report.tolerances;
  out.push(
    `tolerances: L ${t.lagBoundMs} ms, R ${t.recoveryAllowanceMs} ms, δ ${t.inFlightSlackMs} ms, ` +
      `end grace ${t.endGraceMs} ms, early ${t.earlyToleranceMs} ms`,
  );
  out.push('');
  const rows = [['check', 'violations', 'result']];
  for (const kind of VIOLATION_KINDS) {
    const n = report.violations[kind].count;
    rows.push([CHECK_OF[kind], String(n), n === 0 ? 'ok' : 'FAIL']);
  }
  const unknown = report.register.unknownJobs.length;
  rows.push(['f jobs not proven (step cap)', String(unknown), unknown === 0 ? 'ok' : 'UNKNOWN']);
  out.push(table(rows));
  out.push('');

  out.push(figuresTable(report));
  out.push('');
  out.push(
    table([
      ['fire lag (first attempt, ms)', 'slots', 'p50', 'p99', 'max'],
      lagRow('inside fault windows', report.lag.insideFaults),
      lagRow('outside fault windows', report.lag.outsideFaults),
    ]),
  );
  const recovery = report.lag.recovery;
  if (recovery.length > 0) {
    out.push('');
    const rrows = [['fault', 'kind', 'start s', 'end s', 'slots after', 'late', 'recovery ms']];
    for (const r of recovery.slice(0, faultsShownMax)) {
      rrows.push([
        r.faultId,
        r.kind,
        (r.startT / 1000).toFixed(1),
        Number.isFinite(r.endT) ? (r.endT / 1000).toFixed(1) : 'never',
        String(r.slots),
        String(r.lateSlots),
        r.recoveryMs === null ? 'not recovered' : r.recoveryMs.toFixed(0),
      ]);
    }
    out.push(table(rrows));
    if (recovery.length > faultsShownMax)
      out.push(`… ${recovery.length - faultsShownMax} more faults`);
  }
  for (const kind of VIOLATION_KINDS) {
    const v = report.violations[kind];
    if (v.count === 0) continue;
    out.push('');
    out.push(`${kind}: ${v.count} (first ${v.examples.length})`);
    for (const e of v.examples) {
      const where = [
        e.jobId && `job ${e.jobId}`,
        e.fireId && `fire ${e.fireId}`,
        e.t !== undefined && `t ${e.t.toFixed(0)} ms`,
      ]
        .filter(Boolean)
        .join(', ');
      out.push(`  - ${where}: ${e.message.split('\n').join('\n    ')}`);
    }
  }
  if (report.register.unknownJobs.length > 0)
    out.push(
      '',
      `not proven within the step cap: ${report.register.unknownJobs.slice(0, 10).join(', ')}`,
    );
  return out.join('\n');
}

function figuresTable(report: CheckReport): string {
  const s = report.slots;
  const recorded = Object.entries(s.slotsRecordedOnly)
    .map(([status, n]) => `${status} ${n}`)
    .join(', ');
  return table([
    ['figure', 'value'],
    [
      'jobs acknowledged / present at end / unread',
      `${report.jobs.jobsAcknowledged} / ${report.jobs.jobsPresentAtEnd} / ${report.jobs.jobsUnread}`,
    ],
    ['jobs with owed slots / uncheckable', `${s.jobsChecked} / ${s.jobsUncheckable.length}`],
    ['slots owed', String(s.slotsOwed)],
    ['  delivered', String(s.slotsDelivered)],
    ['  recorded only', recorded === '' ? '0' : recorded],
    ['  unobserved (no read reached them)', String(s.slotsUnobserved)],
    ['run records checked', String(s.runRecordsChecked)],
    ['at-least-once duplicates allowed', String(report.duplicates.atLeastOnceDuplicatesAllowed)],
    ['ordinary retries', String(report.duplicates.retries)],
    [
      'sink: accepted / refused stale / refused fresh',
      `${report.fencing.accepted} / ${report.fencing.refusedStale} / ${report.fencing.refusedFresh}`,
    ],
    [
      'acked pauses / cancels',
      `${report.afterStop.acknowledgedPauses} / ${report.afterStop.acknowledgedCancels}`,
    ],
    [
      'job operations checked (linearizability)',
      `${report.register.operations} in ${report.register.jobs} jobs`,
    ],
  ]);
}
