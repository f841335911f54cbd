/**
 * How long a tenant's finished runs are kept, per job: the history (SUCCEEDED, FAILED, SKIPPED,
 * MISSED, CANCELLED, UNKNOWN) and the DLQ (DEAD) each by count and by age since the run finished.
 * Stored with the tenant in the meta group; each data group's leader sweeps its runs against it
 * and proposes what to drop (src/scheduler/dispatcher.ts), so followers apply the leader's decision.
 */
export interface RunRetention {
  readonly historyPerJob: number;
  readonly historyMaxAgeMs: number;
  readonly deadPerJob: number;
  readonly deadMaxAgeMs: number;
}

const DAY_MS = 24 * 3600_000;

/** What a tenant keeps unless it says otherwise: the most the state machine keeps for history. */
export const DEFAULT_RUN_RETENTION: RunRetention = Object.freeze({
  historyPerJob: 100,
  historyMaxAgeMs: 7 * DAY_MS,
  deadPerJob: 100,
  deadMaxAgeMs: 14 * DAY_MS,
});

/** The bounds each retention field is checked against (the state machine keeps no more). */
export const RUN_RETENTION_BOUNDS: Readonly<Record<keyof RunRetention, readonly [number, number]>> =
  Object.freeze({
    historyPerJob: [1, 100],
    historyMaxAgeMs: [60_000, 7 * DAY_MS],
    deadPerJob: [1, 1000],
    deadMaxAgeMs: [60_000, 90 * DAY_MS],
  });
