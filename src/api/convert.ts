/**
 * Messages of proto/tickraft.proto (as @grpc/proto-loader decodes them: camelCase, enums by
 * name, proto3 `optional` fields absent when unset, unset messages null) to the shapes the
 * scheduler validates, and the scheduler's records back to messages. Absent stays absent, so
 * compileJobSpec applies its defaults; an enum value this server does not know is passed through
 * for the validator to name. Records name jobs by their key (src/scheduler/job-key.ts); messages
 * name them by the job id their tenant knows, and the tenant beside it.
 */
import { DEFAULT_RUN_RETENTION } from '../placement/run-retention.js';
import { DEFAULT_TENANT_LIMITS } from '../placement/tenant-limits.js';
import type { JobSpecInput } from './job-spec.js';
import type { TenantRecord } from '../placement/meta-state.js';
import { jobIdOfKey, splitJobKey } from '../scheduler/job-key.js';
import type { Attempt, Job, JobSpec, Run } from '../scheduler/model.js';
import { viewStatus } from '../scheduler/run-view.js';

import type { Msg } from '../base/fields.js';

export type { Msg };

function sub(m: Msg | null | undefined, key: string): Msg | undefined {
  const v = m?.[key];
  return typeof v === 'object' && v !== null ? (v as Msg) : undefined;
}

/** `PREFIX_SOME_NAME` → `some_name`; UNSPECIFIED (and 0) → absent. */
function enumIn(value: unknown, prefix: string): unknown {
  if (value === undefined || value === null || value === 0) return undefined;
  if (typeof value !== 'string') return value;
  if (value === `${prefix}UNSPECIFIED`) return undefined;
  return value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase() : value;
}

function enumOut(value: string, prefix: string): string {
  return `${prefix}${value.toUpperCase()}`;
}

export function jobSpecIn(m: Msg | null | undefined): JobSpecInput {
  if (!m) return {};
  const target = sub(m, 'target');
  const retry = sub(m, 'retry');
  const misfire = sub(m, 'misfire');
  const overlap = sub(m, 'overlap');
  return {
    tenant: m['tenant'],
    name: m['name'],
    schedule: m['schedule'],
    timezone: m['timezone'],
    anchorMs: m['anchorMs'],
    target: target
      ? {
          url: target['url'],
          headers: target['headers'] ?? {},
          completionTimeoutMs: target['completionTimeoutMs'],
        }
      : undefined,
    payload: m['payloadJson'],
    delivery: enumIn(m['delivery'], 'DELIVERY_SEMANTICS_'),
    retry: retry && {
      maxAttempts: retry['maxAttempts'],
      initialBackoffMs: retry['initialBackoffMs'],
      maxBackoffMs: retry['maxBackoffMs'],
      multiplier: retry['multiplier'],
      maxAgeMs: retry['maxAgeMs'],
    },
    attemptDeadlineMs: m['attemptDeadlineMs'],
    misfire: misfire && {
      policy: enumIn(misfire['policy'], 'MISFIRE_POLICY_'),
      fireAllCap: misfire['fireAllCap'],
      catchUpWindowMs: misfire['catchUpWindowMs'],
    },
    overlap: overlap && {
      policy: enumIn(overlap['policy'], 'OVERLAP_POLICY_'),
      bufferCap: overlap['bufferCap'],
      maxConcurrency: overlap['maxConcurrency'],
    },
    priority: m['priority'],
    startAtMs: m['startAtMs'],
    endAtMs: m['endAtMs'],
    remainingFires: m['remainingFires'],
    dependsOn: m['dependsOn'],
    onUpstreamFailure: enumIn(m['onUpstreamFailure'], 'UPSTREAM_FAILURE_POLICY_'),
  };
}

export function isoOf(ms: number | undefined): string {
  return ms === undefined || !Number.isFinite(ms) ? '' : new Date(ms).toISOString();
}

export function jobSpecOut(s: JobSpec): Msg {
  return {
    tenant: s.tenant,
    name: s.name,
    schedule: s.schedule,
    timezone: s.timezone,
    anchorMs: s.anchorMs,
    target: {
      url: s.target.url,
      headers: { ...s.target.headers },
      completionTimeoutMs: s.target.completionTimeoutMs,
    },
    payloadJson: s.payload,
    delivery: enumOut(s.delivery, 'DELIVERY_SEMANTICS_'),
    retry: { ...s.retry },
    attemptDeadlineMs: s.attemptDeadlineMs,
    misfire: { ...s.misfire, policy: enumOut(s.misfire.policy, 'MISFIRE_POLICY_') },
    // maxConcurrency only when the definition has it: absent means the policy's default (1, or
    // no limit for allow), and a reply read, changed to allow and sent back stays valid.
    overlap: { ...s.overlap, policy: enumOut(s.overlap.policy, 'OVERLAP_POLICY_') },
    priority: s.priority,
    startAtMs: s.startAtMs,
    endAtMs: s.endAtMs,
    remainingFires: s.remainingFires,
    dependsOn: (s.dependsOn?.jobs ?? []).map(jobIdOfKey),
    onUpstreamFailure:
      s.dependsOn === undefined
        ? 'UPSTREAM_FAILURE_POLICY_UNSPECIFIED'
        : enumOut(s.dependsOn.onUpstreamFailure, 'UPSTREAM_FAILURE_POLICY_'),
  };
}

/** A paused job fires nothing until it is resumed, so it shows no next fire. */
export function jobOut(j: Job, groupId: number): Msg {
  const next = j.paused ? undefined : j.nextFireAtMs;
  return {
    id: jobIdOfKey(j.id),
    spec: jobSpecOut(j),
    version: j.version,
    paused: j.paused,
    createdAtMs: j.createdAtMs,
    createdAt: isoOf(j.createdAtMs),
    updatedAtMs: j.updatedAtMs,
    updatedAt: isoOf(j.updatedAtMs),
    nextFireAtMs: next,
    nextFireAt: isoOf(next),
    remaining: j.remaining,
    groupId,
  };
}

function attemptOut(a: Attempt): Msg {
  return {
    attempt: a.attempt,
    fencingToken: a.token,
    startedAtMs: a.startedAtMs,
    startedAt: isoOf(a.startedAtMs),
    outcome:
      a.outcome === undefined
        ? 'ATTEMPT_OUTCOME_UNSPECIFIED'
        : enumOut(a.outcome, 'ATTEMPT_OUTCOME_'),
    statusCode: a.statusCode ?? 0,
    durationMs: a.durationMs,
    error: a.error ?? '',
    responseExcerpt: a.responseExcerpt ?? '',
    nodeId: a.node ?? '',
    workerId: a.worker ?? '',
    outputNodeId: a.outputNode ?? '',
  };
}

/**
 * A run; its tenant and job id come from its job's key (a deleted job's runs keep both). Its
 * status is what users see (run-view.ts): `inFlight` says its leader has an attempt of it out.
 */
export function runOut(r: Run, inFlight = false): Msg {
  const { tenant, jobId } = splitJobKey(r.jobId);
  return {
    fireId: r.fireId,
    jobId,
    slotMs: r.slotMs,
    slot: isoOf(r.slotMs),
    status: enumOut(viewStatus(r, inFlight), 'RUN_STATUS_'),
    reason: r.reason ?? '',
    dueAtMs: r.dueAtMs,
    attempts: r.attempts.map(attemptOut),
    createdAtMs: r.createdAtMs,
    finishedAtMs: r.finishedAtMs,
    manual: r.manual,
    tenant,
    payloadJson: r.overrides?.payload,
    headerNames: Object.keys(r.overrides?.headers ?? {}),
    completeByMs: r.completeByMs,
  };
}

/** `RUN_STATUS_DEAD` → `DEAD`; UNSPECIFIED → undefined (every status). */
export function runStatusIn(value: unknown): string | undefined {
  const v = enumIn(value, 'RUN_STATUS_');
  return typeof v === 'string' ? v.toUpperCase() : undefined;
}

export function tenantOut(t: TenantRecord): Msg {
  return {
    id: t.id,
    secretHints: t.signingSecrets.map((s) => `…${s.slice(-4)}`),
    inflightMax: t.inflightMax,
    updatedAtMs: t.updatedAtMs,
    updatedAt: isoOf(t.updatedAtMs),
    previousSecretUntilMs: t.previousSecretUntilMs,
    priorityWeight: t.priorityWeight,
    retention: t.retention ?? DEFAULT_RUN_RETENTION,
    limits: t.limits ?? DEFAULT_TENANT_LIMITS,
  };
}
