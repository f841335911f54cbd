/**
 * A job definition as a client sends it (JSON-shaped, most fields optional) turned into the
 * complete JobSpec the log stores, with every violation named by field, and the job's first
 * slot. Runs on the node that proposes the create or update, never inside apply: the state
 * machine only ever sees specs that passed here, with the defaults written out.
 *
 * Defaults: timezone UTC; delivery at_least_once; retry 5 attempts, 1 s initial backoff ×2 up to
 * 5 min, max age 24 h; attempt deadline 30 s; misfire fire_once within a 1 h catch-up window
 * (fire_all cap 100); overlap allow (buffer_all cap 10; no maxConcurrency written: absent means
 * 1 for skip and buffer_*, no limit for allow); priority 2; payload `{}`. An `every`
 * schedule without an anchor is anchored at the creation time, written into the spec so every
 * replica counts from the same instant.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { validateRetryPolicy } from '../delivery/backoff.js';
import type { TargetPolicy } from '../delivery/target-policy.js';
import { validateWebhookJob } from '../delivery/webhook.js';
import { nextFire } from '../schedule/next-fire.js';
import { tryParseSchedule, type Schedule } from '../schedule/parse.js';
import {
  COMPLETION_TIMEOUT_MS_MAX,
  COMPLETION_TIMEOUT_MS_MIN,
  type DeliverySemantics,
  type JobSpec,
  type MisfirePolicyName,
  type OverlapPolicyName,
  type OverlapSettings,
  type RetryPolicy,
  type Dependencies,
  type UpstreamFailurePolicy,
  UPSTREAMS_MAX,
} from '../scheduler/model.js';
import { jobKeyOf } from '../scheduler/job-key.js';

export const PAYLOAD_BYTES_MAX = 64 * 1024;
export const NAME_CHARS_MAX = 200;
export const TENANT_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const JOB_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
export const PRIORITY_MAX = 3;
export const FIRE_ALL_CAP_MAX = 10_000;
export const BUFFER_CAP_MAX = 1_000;
export const MAX_CONCURRENCY_MAX = 1_000;
/** The policies `overlap.maxConcurrency` applies to, as the API spells them. */
const LIMITED_OVERLAP_POLICIES =
  'OVERLAP_POLICY_SKIP, OVERLAP_POLICY_BUFFER_ONE and OVERLAP_POLICY_BUFFER_ALL';
export const CATCH_UP_WINDOW_MS_MAX = 7 * 86_400_000;

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  maxAttempts: 5,
  initialBackoffMs: 1_000,
  maxBackoffMs: 300_000,
  multiplier: 2,
  maxAgeMs: 86_400_000,
});

/** What a client may send; absent fields take the defaults above. */
export interface JobSpecInput {
  readonly tenant?: unknown;
  readonly name?: unknown;
  readonly schedule?: unknown;
  readonly timezone?: unknown;
  readonly anchorMs?: unknown;
  readonly target?: unknown;
  readonly payload?: unknown;
  readonly delivery?: unknown;
  readonly retry?: unknown;
  readonly attemptDeadlineMs?: unknown;
  readonly misfire?: unknown;
  readonly overlap?: unknown;
  readonly priority?: unknown;
  readonly startAtMs?: unknown;
  readonly endAtMs?: unknown;
  readonly remainingFires?: unknown;
  /** Job ids of the same tenant. */
  readonly dependsOn?: unknown;
  readonly onUpstreamFailure?: unknown;
}

export interface CompiledJobSpec {
  readonly spec: JobSpec;
  readonly schedule: Schedule;
}

export interface CompileJobSpecOptions {
  /**
   * Refuse a target URL whose host is an address webhooks may not reach (or `localhost`): a
   * create or update passes the node's policy. Absent when a stored job is compiled again (its
   * URL was checked when it was written; the connect step checks every send).
   */
  readonly targetPolicy?: TargetPolicy;
}

/**
 * Completes and checks a client's job definition.
 * @throws ValidationError JOB_SPEC_INVALID with every violation, each naming its field.
 */
export function compileJobSpec(
  input: JobSpecInput,
  nowMs: number,
  options: CompileJobSpecOptions = {},
): CompiledJobSpec {
  const v: FieldViolation[] = [];
  const add = (field: string, reason: string): void => void v.push({ field, reason });

  const tenant = str(input.tenant, 'tenant', add);
  if (tenant !== undefined && !TENANT_ID_PATTERN.test(tenant))
    add(
      'tenant',
      'must be 1-63 lowercase letters, digits, _ or -, starting with a letter or digit',
    );
  const name = str(input.name, 'name', add, '');
  if (name !== undefined && name.length > NAME_CHARS_MAX)
    add('name', `must be at most ${NAME_CHARS_MAX} characters`);
  const scheduleText = str(input.schedule, 'schedule', add);
  const timezone = str(input.timezone, 'timezone', add, 'UTC');
  const anchorIn = optInt(input.anchorMs, 'anchorMs', add);

  const targetIn = obj(input.target, 'target', add);
  const url = targetIn ? str(targetIn['url'], 'target.url', add) : undefined;
  const headers: Record<string, string> = {};
  const headersIn = targetIn ? obj(targetIn['headers'], 'target.headers', add, true) : undefined;
  for (const [k, val] of Object.entries(headersIn ?? {})) {
    if (typeof val === 'string') headers[k] = val;
    else add(`target.headers.${k}`, 'must be a string');
  }
  const completionTimeoutMs = targetIn
    ? optCount(
        targetIn['completionTimeoutMs'],
        'target.completionTimeoutMs',
        COMPLETION_TIMEOUT_MS_MIN,
        COMPLETION_TIMEOUT_MS_MAX,
        add,
      )
    : undefined;

  let payload = '{}';
  if (input.payload !== undefined) {
    if (typeof input.payload === 'string') payload = input.payload;
    else payload = JSON.stringify(input.payload);
  }
  if (utf8Length(payload) > PAYLOAD_BYTES_MAX)
    add('payload', `must be at most ${PAYLOAD_BYTES_MAX} bytes of UTF-8`);

  const delivery = oneOf<DeliverySemantics>(
    input.delivery,
    'delivery',
    'DELIVERY_SEMANTICS_',
    ['at_least_once', 'at_most_once'],
    'at_least_once',
    add,
  );
  const retryIn = obj(input.retry, 'retry', add, true) ?? {};
  const retry: RetryPolicy = {
    maxAttempts: int(retryIn['maxAttempts'], 'retry.maxAttempts', add, DEFAULT_RETRY.maxAttempts),
    initialBackoffMs: int(
      retryIn['initialBackoffMs'],
      'retry.initialBackoffMs',
      add,
      DEFAULT_RETRY.initialBackoffMs,
    ),
    maxBackoffMs: int(
      retryIn['maxBackoffMs'],
      'retry.maxBackoffMs',
      add,
      DEFAULT_RETRY.maxBackoffMs,
    ),
    multiplier: num(retryIn['multiplier'], 'retry.multiplier', add, DEFAULT_RETRY.multiplier),
    maxAgeMs: int(retryIn['maxAgeMs'], 'retry.maxAgeMs', add, DEFAULT_RETRY.maxAgeMs),
  };
  const attemptDeadlineMs = int(input.attemptDeadlineMs, 'attemptDeadlineMs', add, 30_000);

  const misfireIn = obj(input.misfire, 'misfire', add, true) ?? {};
  const misfire = {
    policy: oneOf<MisfirePolicyName>(
      misfireIn['policy'],
      'misfire.policy',
      'MISFIRE_POLICY_',
      ['fire_all', 'fire_once', 'skip'],
      'fire_once',
      add,
    ),
    fireAllCap: int(misfireIn['fireAllCap'], 'misfire.fireAllCap', add, 100),
    catchUpWindowMs: int(misfireIn['catchUpWindowMs'], 'misfire.catchUpWindowMs', add, 3_600_000),
  };
  if (misfire.fireAllCap < 1 || misfire.fireAllCap > FIRE_ALL_CAP_MAX)
    add('misfire.fireAllCap', `must be in [1, ${FIRE_ALL_CAP_MAX}]`);
  if (misfire.catchUpWindowMs < 0 || misfire.catchUpWindowMs > CATCH_UP_WINDOW_MS_MAX)
    add('misfire.catchUpWindowMs', `must be in [0, ${CATCH_UP_WINDOW_MS_MAX}]`);

  const overlap = compileOverlap(input.overlap, add);

  const priority = int(input.priority, 'priority', add, 2);
  if (priority < 0 || priority > PRIORITY_MAX) add('priority', `must be in [0, ${PRIORITY_MAX}]`);
  const startAtMs = optInt(input.startAtMs, 'startAtMs', add);
  const endAtMs = optInt(input.endAtMs, 'endAtMs', add);
  if (startAtMs !== undefined && endAtMs !== undefined && endAtMs < startAtMs)
    add('endAtMs', 'must not be before start_at_ms');
  const remainingFires = optInt(input.remainingFires, 'remainingFires', add);
  if (remainingFires !== undefined && remainingFires < 1)
    add('remainingFires', 'must be at least 1 when given');
  const dependsOn = compileDependencies(input, tenant, add);

  let schedule: Schedule | undefined;
  let anchorMs = anchorIn;
  if (scheduleText !== undefined && timezone !== undefined) {
    const isInterval = /^\s*every\b/i.test(scheduleText);
    if (isInterval && anchorMs === undefined) anchorMs = nowMs;
    const parsed = tryParseSchedule(scheduleText, { timezone, anchorMs });
    if (parsed.ok) schedule = parsed.schedule;
    else for (const pv of parsed.violations) v.push(pv);
    if (!isInterval) anchorMs = undefined;
  }

  const spec: JobSpec = {
    tenant: tenant ?? '',
    name: name ?? '',
    schedule: scheduleText ?? '',
    timezone: schedule?.timezone ?? timezone ?? 'UTC',
    anchorMs,
    // Absent stays absent (retained.ts): a target without it is stored as before it existed.
    target:
      completionTimeoutMs === undefined
        ? { url: url ?? '', headers }
        : { url: url ?? '', headers, completionTimeoutMs },
    payload,
    delivery,
    retry,
    attemptDeadlineMs,
    misfire,
    overlap,
    priority,
    startAtMs,
    endAtMs,
    remainingFires,
    dependsOn,
  };
  if (url !== undefined)
    v.push(...validateWebhookJob({ ...spec, id: 'x' }, '', options.targetPolicy));
  v.push(...validateRetryPolicy(retry));
  if (v.length > 0) throw new ValidationError('JOB_SPEC_INVALID', dedupe(v));
  return { spec, schedule: schedule! };
}

/** Definitions a JobSpecCompiler remembers (one call's worth at most: CREATE_BATCH_MAX jobs). */
const COMPILER_BASES_MAX = 1000;

/**
 * compileJobSpec for the jobs of one bulk call: jobs registered together usually differ only in
 * name, schedule and anchor, so the rest of a definition is checked once per distinct value
 * (the first job that has it goes through compileJobSpec) and each further job checks only its
 * own fields. Anything unusual in those goes through compileJobSpec too, which names every
 * violation, so the result is always what compileJobSpec would return at `nowMs`.
 */
export class JobSpecCompiler {
  /** Key of the shared fields → a spec compileJobSpec accepted with them. */
  private readonly bases = new Map<string, JobSpec>();

  constructor(
    readonly nowMs: number,
    readonly options: CompileJobSpecOptions = {},
  ) {}

  /** The last input compiled, and the spec its shared fields were taken from. */
  private last: { readonly input: JobSpecInput; readonly base: JobSpec } | undefined;

  compile(input: JobSpecInput): CompiledJobSpec {
    // Jobs of a bulk call mostly share their fields with the job before them: compared value by
    // value, that finds the base without building the key (a string per job).
    if (this.last !== undefined && sameSharedFields(this.last.input, input)) {
      const own = withOwnFields(this.last.base, input, this.nowMs);
      if (own !== undefined) {
        this.last = { input, base: this.last.base };
        return own;
      }
    }
    const key = sharedFieldsKey(input);
    const base = this.bases.get(key);
    if (base !== undefined) {
      const own = withOwnFields(base, input, this.nowMs);
      if (own !== undefined) {
        this.last = { input, base };
        return own;
      }
    }
    const compiled = compileJobSpec(input, this.nowMs, this.options);
    if (this.bases.size < COMPILER_BASES_MAX) this.bases.set(key, compiled.spec);
    this.last = { input, base: compiled.spec };
    return compiled;
  }
}

/** Whether two inputs have equal shared fields in the sense of sharedFieldsKey (or stricter). */
function sameSharedFields(a: JobSpecInput, b: JobSpecInput): boolean {
  return (
    sameValue(a.tenant, b.tenant) &&
    sameValue(a.timezone, b.timezone) &&
    sameValue(a.target, b.target) &&
    sameValue(a.payload, b.payload) &&
    sameValue(a.delivery, b.delivery) &&
    sameValue(a.retry, b.retry) &&
    sameValue(a.attemptDeadlineMs, b.attemptDeadlineMs) &&
    sameValue(a.misfire, b.misfire) &&
    sameValue(a.overlap, b.overlap) &&
    sameValue(a.priority, b.priority) &&
    sameValue(a.startAtMs, b.startAtMs) &&
    sameValue(a.endAtMs, b.endAtMs) &&
    sameValue(a.remainingFires, b.remainingFires) &&
    sameValue(a.dependsOn, b.dependsOn) &&
    sameValue(a.onUpstreamFailure, b.onUpstreamFailure)
  );
}

/**
 * Equal JSON-like values: primitives by Object.is, arrays element by element, objects key by
 * key in the same order. A function, symbol or bigint is never equal (valueKey gives it a key
 * of its own), so such an input always goes the key's way and on to the full check.
 */
function sameValue(a: unknown, b: unknown): boolean {
  const type = typeof a;
  if (type !== typeof b || type === 'function' || type === 'symbol' || type === 'bigint')
    return false;
  if (type !== 'object' || a === null || b === null) return Object.is(a, b);
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameValue(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  return sameObject(a as Record<string, unknown>, b as Record<string, unknown>);
}

/**
 * Own keys of the objects being compared, a stack shared by the nested calls: this runs for
 * every job of a CreateJobs call, and Object.keys would allocate two arrays per object.
 */
const keyStack: string[] = [];
let keyTop = 0;

function sameObject(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const base = keyTop;
  try {
    for (const k in a) if (Object.hasOwn(a, k)) keyStack[keyTop++] = k;
    const n = keyTop - base;
    let i = 0;
    for (const k in b) {
      if (!Object.hasOwn(b, k)) continue;
      if (i === n || keyStack[base + i] !== k) return false;
      i++;
    }
    if (i !== n) return false;
    for (let j = 0; j < n; j++) {
      const k = keyStack[base + j]!;
      if (!sameValue(a[k], b[k])) return false;
    }
    return true;
  } finally {
    keyTop = base;
  }
}

/**
 * Every field but name, schedule and anchor, in one string: two inputs with one key are equal
 * field by field, with `undefined`, `null`, NaN and the infinities all told apart (JSON would
 * not).
 */
function sharedFieldsKey(input: JobSpecInput): string {
  return (
    valueKey(input.tenant) +
    valueKey(input.timezone) +
    valueKey(input.target) +
    valueKey(input.payload) +
    valueKey(input.delivery) +
    valueKey(input.retry) +
    valueKey(input.attemptDeadlineMs) +
    valueKey(input.misfire) +
    valueKey(input.overlap) +
    valueKey(input.priority) +
    valueKey(input.startAtMs) +
    valueKey(input.endAtMs) +
    valueKey(input.remainingFires) +
    valueKey(input.dependsOn) +
    valueKey(input.onUpstreamFailure)
  );
}

let uniqueKeys = 0;

/** A self-delimiting text of a JSON-like value; each kind has its own first character. */
function valueKey(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return `s${v.length}:${v}`;
    case 'number':
      return Object.is(v, -0) ? 'n-0;' : `n${v};`;
    case 'boolean':
      return v ? 'T' : 'F';
    case 'undefined':
      return 'u';
    case 'object': {
      if (v === null) return 'z';
      if (Array.isArray(v)) {
        let out = 'a';
        for (const x of v) out += valueKey(x);
        return `${out}]`;
      }
      let out = 'o';
      for (const k of Object.keys(v))
        out += `${k.length}:${k}${valueKey((v as Record<string, unknown>)[k])}`;
      return `${out}}`;
    }
    default:
      // A function, symbol or bigint: a key of its own, so the input is always checked in full.
      return `?${++uniqueKeys};`;
  }
}

/**
 * `base` with the job's own name, schedule and anchor, when they are plainly valid and the
 * schedule has a slot; undefined otherwise (the caller then runs the full check).
 */
function withOwnFields(
  base: JobSpec,
  input: JobSpecInput,
  nowMs: number,
): CompiledJobSpec | undefined {
  const name = input.name ?? '';
  if (typeof name !== 'string' || name.length > NAME_CHARS_MAX) return undefined;
  const text = input.schedule;
  if (typeof text !== 'string' || text.trim() === '') return undefined;
  const anchorIn = input.anchorMs ?? undefined;
  if (anchorIn !== undefined && (typeof anchorIn !== 'number' || !Number.isSafeInteger(anchorIn)))
    return undefined;
  let anchorMs = anchorIn;
  // The zone as the base's input gave it (same key), not as the base's schedule resolved it.
  const zone = typeof input.timezone === 'string' ? input.timezone : 'UTC';
  const isInterval = /^\s*every\b/i.test(text);
  if (isInterval && anchorMs === undefined) anchorMs = nowMs;
  const parsed = tryParseSchedule(text, { timezone: zone, anchorMs });
  if (!parsed.ok) return undefined;
  if (!isInterval) anchorMs = undefined;
  const spec: JobSpec = {
    tenant: base.tenant,
    name,
    schedule: text,
    timezone: parsed.schedule.timezone,
    anchorMs,
    target: base.target,
    payload: base.payload,
    delivery: base.delivery,
    retry: base.retry,
    attemptDeadlineMs: base.attemptDeadlineMs,
    misfire: base.misfire,
    overlap: base.overlap,
    priority: base.priority,
    startAtMs: base.startAtMs,
    endAtMs: base.endAtMs,
    remainingFires: base.remainingFires,
    dependsOn: base.dependsOn,
  };
  return { spec, schedule: parsed.schedule };
}

/**
 * The first slot at or after `fromMs` (strictly after `fromMs - 1`) that the job's start and end
 * allow, or undefined when there is none.
 */
export function firstSlotMs(c: CompiledJobSpec, fromMs: number): number | undefined {
  const from = Math.max(fromMs, c.spec.startAtMs ?? fromMs);
  const slot = nextFire(c.schedule, from - 1);
  if (slot === undefined) return undefined;
  if (c.spec.endAtMs !== undefined && slot > c.spec.endAtMs) return undefined;
  return slot;
}

/**
 * A create for a job that would never fire is refused rather than stored finished; `field` is
 * the schedule's path in the request.
 */
export function requireFirstSlot(
  c: CompiledJobSpec,
  nowMs: number,
  field = 'spec.schedule',
): number {
  const slot = firstSlotMs(c, nowMs);
  if (slot === undefined) {
    throw new ValidationError('JOB_SPEC_INVALID', [
      { field, reason: 'has no slot from now on (an instant in the past, or ended)' },
    ]);
  }
  return slot;
}

type Add = (field: string, reason: string) => void;

function str(value: unknown, field: string, add: Add, dflt?: string): string | undefined {
  if (value === undefined || value === null) {
    if (dflt === undefined) add(field, 'is required');
    return dflt;
  }
  if (typeof value !== 'string') {
    add(field, 'must be a string');
    return undefined;
  }
  if (dflt === undefined && value.trim() === '') {
    add(field, 'must not be empty');
    return undefined;
  }
  return value;
}

function obj(
  value: unknown,
  field: string,
  add: Add,
  optional = false,
): Record<string, unknown> | undefined {
  if (value === undefined || value === null) {
    if (!optional) add(field, 'is required');
    return undefined;
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    add(field, 'must be an object');
    return undefined;
  }
  return value as Record<string, unknown>;
}

function num(value: unknown, field: string, add: Add, dflt: number): number {
  if (value === undefined || value === null) return dflt;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    add(field, 'must be a finite number');
    return dflt;
  }
  return value;
}

function int(value: unknown, field: string, add: Add, dflt: number): number {
  const n = num(value, field, add, dflt);
  if (!Number.isSafeInteger(n)) {
    add(field, 'must be an integer');
    return dflt;
  }
  return n;
}

/**
 * The overlap settings: policy (default allow), buffer_all's cap (default 10) and the limit on
 * runs in flight. The limit is written only when given (not as `undefined`): a definition
 * without it is stored, logged and compared exactly as before the field existed, reads back
 * without it, and means 1 for skip and buffer_*, no limit for allow.
 */
function compileOverlap(value: unknown, add: Add): OverlapSettings {
  const overlapIn = obj(value, 'overlap', add, true) ?? {};
  const policy = oneOf<OverlapPolicyName>(
    overlapIn['policy'],
    'overlap.policy',
    'OVERLAP_POLICY_',
    ['allow', 'skip', 'buffer_one', 'buffer_all'],
    'allow',
    add,
  );
  const bufferCap = int(overlapIn['bufferCap'], 'overlap.bufferCap', add, 10);
  if (bufferCap < 1 || bufferCap > BUFFER_CAP_MAX)
    add('overlap.bufferCap', `must be in [1, ${BUFFER_CAP_MAX}]`);
  const limitIn = overlapIn['maxConcurrency'];
  const maxConcurrency = optCount(limitIn, 'overlap.maxConcurrency', 1, MAX_CONCURRENCY_MAX, add);
  // Refused rather than dropped: a caller who set a limit expects one, and allow has none.
  if (limitIn !== undefined && limitIn !== null && policy === 'allow')
    add(
      'overlap.maxConcurrency',
      `OVERLAP_POLICY_ALLOW (the default policy) places no limit on runs in flight: max_concurrency applies only to ${LIMITED_OVERLAP_POLICIES}`,
    );
  return maxConcurrency === undefined
    ? { policy, bufferCap }
    : { policy, bufferCap, maxConcurrency };
}

/** An optional count in [min, max]: absent stays absent, anything else is checked. */
function optCount(
  value: unknown,
  field: string,
  min: number,
  max: number,
  add: Add,
): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    add(field, `must be an integer in [${min}, ${max}]`);
    return undefined;
  }
  if (value < min || value > max) {
    add(field, `must be in [${min}, ${max}]`);
    return undefined;
  }
  return value;
}

function optInt(value: unknown, field: string, add: Add): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    add(field, 'must be an integer (UTC ms)');
    return undefined;
  }
  return value;
}

/**
 * An enum field: absent takes `dflt`; anything but one of `allowed` (an unknown number a client
 * sent, say) is a violation naming the values as the API spells them (`protoPrefix` + name).
 */
function oneOf<T extends string>(
  value: unknown,
  field: string,
  protoPrefix: string,
  allowed: readonly T[],
  dflt: T,
  add: Add,
): T {
  if (value === undefined || value === null) return dflt;
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    const names = allowed.map((a) => `${protoPrefix}${a.toUpperCase()}`);
    add(
      field,
      `${JSON.stringify(value)} is not one of ${names.join(', ')} (leave it unset for ${protoPrefix}${dflt.toUpperCase()})`,
    );
    return dflt;
  }
  return value as T;
}

/**
 * `dependsOn` (job ids of the tenant) and `onUpstreamFailure` as the state keeps them (job keys);
 * undefined when the job has none. That they exist and form no cycle is checked by the API with
 * the tenant's other jobs (dependency-graph.ts); the job naming itself is checked there too.
 */
function compileDependencies(
  input: JobSpecInput,
  tenant: string | undefined,
  add: Add,
): Dependencies | undefined {
  const policy = oneOf<UpstreamFailurePolicy>(
    input.onUpstreamFailure,
    'onUpstreamFailure',
    'UPSTREAM_FAILURE_POLICY_',
    ['skip', 'run'],
    'skip',
    add,
  );
  const ids = input.dependsOn;
  if (ids === undefined || ids === null || (Array.isArray(ids) && ids.length === 0)) {
    if (input.onUpstreamFailure !== undefined && input.onUpstreamFailure !== null)
      add('onUpstreamFailure', 'applies only to a job with depends_on');
    return undefined;
  }
  if (!Array.isArray(ids)) {
    add('dependsOn', 'must be a list of job ids');
    return undefined;
  }
  if (ids.length > UPSTREAMS_MAX) add('dependsOn', `at most ${UPSTREAMS_MAX} jobs`);
  const seen = new Set<string>();
  ids.forEach((id, i) => {
    if (typeof id !== 'string' || !JOB_ID_PATTERN.test(id))
      add(`dependsOn[${i}]`, 'must be a job id of the same tenant');
    else if (seen.has(id)) add(`dependsOn[${i}]`, `${JSON.stringify(id)} is listed twice`);
    else seen.add(id);
  });
  if (tenant === undefined || !TENANT_ID_PATTERN.test(tenant)) return undefined;
  return {
    jobs: [...seen].map((id) => jobKeyOf(tenant, id)),
    onUpstreamFailure: policy,
  };
}

function dedupe(v: FieldViolation[]): FieldViolation[] {
  const seen = new Set<string>();
  return v.filter((x) => {
    const k = `${x.field}\u0000${x.reason}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
