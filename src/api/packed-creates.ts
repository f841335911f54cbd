/**
 * A CreateJobs part forwarded between nodes as the create-jobs entries the group's log will
 * hold (NodeService.GroupCreateJobs), and the leader's check of such entries before it proposes
 * them as they are.
 *
 * The node that took the call has checked every job in full and computed each first slot; the
 * group's leader, which trusts no caller, checks the entries again, but from their packed form:
 * each distinct definition through compileJobSpec once, each job only its own fields (id, name,
 * request id, schedule, anchor, first slot) against that definition. A job's id is its key,
 * `<tenant>/<job id>` with its definition's tenant, and its request id is scoped by that tenant
 * (scheduler-admin.ts, scopedRequestId), as createCommand makes them. What it accepts is exactly
 * what packCreates would make of jobs that createCommand accepted at the entry's time, so a
 * follower applying it needs nothing the entry does not hold. Skipped against a full check: the
 * protobuf form of every job, a spec object per job, and packing and encoding the entry again.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import type { TargetPolicy } from '../delivery/target-policy.js';
import { decode } from '../base/codec.js';
import { hashShardKey } from '../placement/hash.js';
import { lookupRange, type RingRange } from '../placement/ring.js';
import { tryParseSchedule } from '../schedule/parse.js';
import { specPartKey, type CreateJobsCommand, type SpecPart } from '../scheduler/commands.js';
import type { JobSpec } from '../scheduler/model.js';
import {
  compileJobSpec,
  firstSlotMs,
  JOB_ID_PATTERN,
  NAME_CHARS_MAX,
  TENANT_ID_PATTERN,
  type CompiledJobSpec,
} from './job-spec.js';

/** What the leader knows that the check needs. */
export interface PackedCheckContext {
  readonly groupId: number;
  /** The ring as this node's meta replica holds it (the caller's route epoch matched it). */
  readonly ranges: readonly RingRange[];
  readonly tenantExists: (tenant: string) => boolean;
  /** Bounds a request id's length (REQUEST_ID_CHARS_MAX). */
  readonly requestIdCharsMax: number;
  /** This node's clock: an entry's time must be near it (PACKED_CLOCK_SKEW_MS_MAX). */
  readonly nowMs: number;
  /** Definitions checked before, by specPartKey (a PackedPartCache kept by the caller). */
  readonly checkedParts?: PackedPartCache;
  /**
   * The targets this leader's jobs may name (`--allow-target`): checked again here, against this
   * node's own policy. A cached definition was checked with it (one policy per process).
   */
  readonly targetPolicy?: TargetPolicy;
}

/** Definitions the full check accepted, so that the next entries with them skip it. */
export class PackedPartCache {
  private static readonly MAX = 1000;
  private readonly byKey = new Map<string, CompiledJobSpec>();

  get(key: string): CompiledJobSpec | undefined {
    return this.byKey.get(key);
  }

  set(key: string, compiled: CompiledJobSpec): void {
    // A bound, not a policy: past it, start again.
    if (this.byKey.size >= PackedPartCache.MAX) this.byKey.clear();
    this.byKey.set(key, compiled);
  }
}

/**
 * How far an entry's time may be from the leader's clock: the forwarding node's clock, plus a
 * forward that took up to its deadline. Farther is not an entry a node made for this call.
 */
export const PACKED_CLOCK_SKEW_MS_MAX = 10 * 60_000;

const ENTRY_KEYS = [
  'op',
  'atMs',
  'specs',
  'jobIds',
  'specOf',
  'schedules',
  'names',
  'anchorsMs',
  'nextFireAtMs',
  'requestIds',
] as const;

const PART_KEYS = [
  'tenant',
  'timezone',
  'target',
  'payload',
  'delivery',
  'retry',
  'attemptDeadlineMs',
  'misfire',
  'overlap',
  'priority',
  'startAtMs',
  'endAtMs',
  'remainingFires',
  'dependsOn',
] as const;

/**
 * Decodes one encoded create-jobs entry and checks its shape: every column of the right type
 * and length.
 * @throws ValidationError REQUEST_INVALID naming `prefix`
 */
export function decodePackedCreates(bytes: Uint8Array, prefix: string): CreateJobsCommand {
  let value: unknown;
  try {
    value = decode(bytes);
  } catch (err) {
    throw invalid(prefix, `does not decode: ${err instanceof Error ? err.message : String(err)}`);
  }
  return shapeOf(value, prefix);
}

/** The tenants an entry's definitions name (to catch up with the meta group before the check). */
export function tenantsOf(c: CreateJobsCommand): Set<unknown> {
  return new Set(c.specs.map((p) => (isMap(p) ? p['tenant'] : undefined)));
}

/**
 * Checks a decoded entry (decodePackedCreates) for `ctx.groupId`: each definition once, each
 * job's own fields against its definition. Bad input is refused with every violation found,
 * fields named under `prefix`.
 * @throws ValidationError REQUEST_INVALID
 */
export function checkPackedCreates(
  c: CreateJobsCommand,
  ctx: PackedCheckContext,
  prefix: string,
): void {
  const v: FieldViolation[] = [];
  const add = (field: string, reason: string): void => void v.push({ field, reason });

  if (Math.abs(c.atMs - ctx.nowMs) > PACKED_CLOCK_SKEW_MS_MAX)
    throw new ValidationError('REQUEST_INVALID', [
      { field: `${prefix}atMs`, reason: `must be within ${PACKED_CLOCK_SKEW_MS_MAX} ms of now` },
    ]);
  // Each definition once (with the first job that uses it): the jobs refer to it by index.
  const n = c.jobIds.length;
  const firstUse = new Array<number>(c.specs.length).fill(-1);
  for (let i = n - 1; i >= 0; i--) firstUse[c.specOf[i]!] = i;
  const bases = c.specs.map((part, k) => basePart(part, k, firstUse[k]!, c, ctx, prefix, add));
  // Field names are built only for a violation: most jobs have none (and no closure per job).
  const field = (i: number, name: string): string => `${prefix}jobs[${i}].${name}`;
  for (let i = 0; i < n; i++) {
    const key = c.jobIds[i]!;
    const slash = key.indexOf('/');
    const tenant = key.slice(0, Math.max(0, slash));
    const isKey =
      slash > 0 && TENANT_ID_PATTERN.test(tenant) && JOB_ID_PATTERN.test(key.slice(slash + 1));
    if (!isKey) add(field(i, 'jobId'), 'must be a job key <tenant>/<job id>');
    else if (lookupRange(ctx.ranges, hashShardKey(key)).groupId !== ctx.groupId)
      add(field(i, 'jobId'), `is not in group ${ctx.groupId}`);
    if (c.names[i]!.length > NAME_CHARS_MAX)
      add(field(i, 'name'), `must be at most ${NAME_CHARS_MAX} characters`);
    const requestId = c.requestIds[i]!;
    if (
      requestId !== '' &&
      (!requestId.startsWith(`${tenant}/`) ||
        requestId.length - tenant.length - 1 > ctx.requestIdCharsMax)
    )
      add(
        field(i, 'requestId'),
        `must be empty or <tenant>/ and at most ${ctx.requestIdCharsMax} characters`,
      );
    const base = bases[c.specOf[i]!];
    if (base === undefined) continue; // its definition was refused already
    if (isKey && base.spec.tenant !== tenant) {
      add(field(i, 'jobId'), "must be a key of its definition's tenant");
      continue;
    }
    const why = ownFieldsProblem(base, c, i);
    if (why !== undefined) add(field(i, why.field), why.reason);
  }
  if (v.length > 0) throw new ValidationError('REQUEST_INVALID', v);
}

function invalid(field: string, reason: string): ValidationError {
  return new ValidationError('REQUEST_INVALID', [{ field: field.replace(/\.$/, ''), reason }]);
}

/** The entry's columns, each of the right type and length (one violation and out otherwise). */
function shapeOf(value: unknown, prefix: string): CreateJobsCommand {
  const bad = (what: string): ValidationError =>
    invalid(prefix, `is not a create-jobs entry: ${what}`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw bad('not a map');
  const m = value as Record<string, unknown>;
  const keys = Object.keys(m);
  if (keys.length !== ENTRY_KEYS.length || !ENTRY_KEYS.every((k) => k in m))
    throw bad(`its fields must be ${ENTRY_KEYS.join(', ')}`);
  if (m['op'] !== 'create-jobs') throw bad('op');
  if (!isSafeInt(m['atMs']) || m['atMs'] <= 0) throw bad('atMs');
  const n = Array.isArray(m['jobIds']) ? m['jobIds'].length : -1;
  if (n < 1) throw bad('no jobs');
  const column = (name: string, ok: (x: unknown) => boolean): void => {
    const col = m[name];
    if (!Array.isArray(col) || col.length !== n || !col.every(ok))
      throw bad(`${name} must hold ${n} elements of its type`);
  };
  const specs = m['specs'];
  if (!Array.isArray(specs) || specs.length < 1 || specs.length > n) throw bad('specs');
  const isString = (x: unknown): boolean => typeof x === 'string';
  const orNull = (x: unknown): boolean => x === null || isSafeInt(x);
  column('jobIds', isString);
  column('specOf', (x) => isSafeInt(x) && x >= 0 && x < specs.length);
  column('schedules', isString);
  column('names', isString);
  column('anchorsMs', orNull);
  column('nextFireAtMs', orNull);
  column('requestIds', isString);
  return m as unknown as CreateJobsCommand;
}

/**
 * The compiled definition a part stands for, when the part is exactly what compileJobSpec
 * writes out for its fields (checked with the first job that uses it); undefined after adding
 * a violation otherwise.
 */
function basePart(
  part: unknown,
  k: number,
  first: number,
  c: CreateJobsCommand,
  ctx: PackedCheckContext,
  prefix: string,
  add: (field: string, reason: string) => void,
): CompiledJobSpec | undefined {
  const field = `${prefix}specs[${k}]`;
  if (first < 0) {
    add(field, 'no job uses it');
    return undefined;
  }
  if (typeof part !== 'object' || part === null || Array.isArray(part)) {
    add(field, 'must be a job definition');
    return undefined;
  }
  const p = part as Record<string, unknown>;
  if (Object.keys(p).length !== PART_KEYS.length || !PART_KEYS.every((key) => key in p)) {
    add(field, `its fields must be ${PART_KEYS.join(', ')}`);
    return undefined;
  }
  // The key is a cache key only: samePart below still compares every field exactly.
  let key: string | undefined;
  try {
    key = specPartKey(p as unknown as SpecPart);
  } catch {
    key = undefined; // a field of the wrong type: the full check names it
  }
  let compiled = key === undefined ? undefined : ctx.checkedParts?.get(key);
  if (compiled === undefined)
    try {
      compiled = compileJobSpec(
        {
          ...p,
          name: c.names[first],
          schedule: c.schedules[first],
          anchorMs: c.anchorsMs[first] ?? undefined,
        },
        c.atMs,
        ctx.targetPolicy === undefined ? {} : { targetPolicy: ctx.targetPolicy },
      );
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      for (const fv of err.violations) add(`${prefix}jobs[${first}].spec.${fv.field}`, fv.reason);
      return undefined;
    }
  if (key !== undefined) ctx.checkedParts?.set(key, compiled);
  if (!samePart(compiled.spec, p)) {
    add(field, 'is not a definition as the node that checked it writes it (defaults written out)');
    return undefined;
  }
  if (!ctx.tenantExists(compiled.spec.tenant)) {
    add(`${field}.tenant`, `tenant ${compiled.spec.tenant} does not exist (create it first)`);
    return undefined;
  }
  return compiled;
}

/** Field by field, with ===: a part that would apply differently is never equal. */
function samePart(s: JobSpec, p: Record<string, unknown>): boolean {
  const t = p['target'] as Record<string, unknown> | null;
  const r = p['retry'] as Record<string, unknown> | null;
  const m = p['misfire'] as Record<string, unknown> | null;
  const o = p['overlap'] as Record<string, unknown> | null;
  if (!isMap(t) || !isMap(r) || !isMap(m) || !isMap(o)) return false;
  const headers = t['headers'] as Record<string, unknown> | null;
  // completionTimeoutMs is a key only when set (compileJobSpec leaves it out otherwise).
  const targetKeys = s.target.completionTimeoutMs === undefined ? 2 : 3;
  if (!isMap(headers) || Object.keys(t).length !== targetKeys) return false;
  const want = Object.entries(s.target.headers);
  const got = Object.entries(headers);
  return (
    s.tenant === p['tenant'] &&
    s.timezone === p['timezone'] &&
    s.target.url === t['url'] &&
    s.target.completionTimeoutMs === t['completionTimeoutMs'] &&
    want.length === got.length &&
    want.every(([key, value], i) => got[i]![0] === key && got[i]![1] === value) &&
    s.payload === p['payload'] &&
    s.delivery === p['delivery'] &&
    Object.keys(r).length === 5 &&
    s.retry.maxAttempts === r['maxAttempts'] &&
    s.retry.initialBackoffMs === r['initialBackoffMs'] &&
    s.retry.maxBackoffMs === r['maxBackoffMs'] &&
    s.retry.multiplier === r['multiplier'] &&
    s.retry.maxAgeMs === r['maxAgeMs'] &&
    s.attemptDeadlineMs === p['attemptDeadlineMs'] &&
    Object.keys(m).length === 3 &&
    s.misfire.policy === m['policy'] &&
    s.misfire.fireAllCap === m['fireAllCap'] &&
    s.misfire.catchUpWindowMs === m['catchUpWindowMs'] &&
    // maxConcurrency is a key only when set (compileJobSpec leaves it out otherwise).
    Object.keys(o).length === (s.overlap.maxConcurrency === undefined ? 2 : 3) &&
    s.overlap.policy === o['policy'] &&
    s.overlap.bufferCap === o['bufferCap'] &&
    s.overlap.maxConcurrency === o['maxConcurrency'] &&
    s.priority === p['priority'] &&
    s.startAtMs === p['startAtMs'] &&
    s.endAtMs === p['endAtMs'] &&
    s.remainingFires === p['remainingFires'] &&
    // Jobs with dependencies are created one by one (CreateJob), never packed.
    s.dependsOn === undefined &&
    p['dependsOn'] === undefined
  );
}

/**
 * What is wrong with job `i`'s own fields against its definition, as createCommand would have
 * made them at the entry's time: its schedule parses in the definition's zone, an interval has
 * its anchor and a cron or `at` none, and its first slot is the one the schedule gives.
 */
function ownFieldsProblem(
  base: CompiledJobSpec,
  c: CreateJobsCommand,
  i: number,
): FieldViolation | undefined {
  const text = c.schedules[i]!;
  const anchorMs = c.anchorsMs[i] ?? undefined;
  const isInterval = /^\s*every\b/i.test(text);
  if (isInterval !== (anchorMs !== undefined))
    return { field: 'spec.anchorMs', reason: 'must be given for an interval, and only then' };
  const parsed = tryParseSchedule(text, { timezone: base.spec.timezone, anchorMs });
  if (!parsed.ok) {
    const first = parsed.violations[0]!;
    return { field: `spec.${first.field}`, reason: first.reason };
  }
  if (parsed.schedule.timezone !== base.spec.timezone)
    return { field: 'spec.timezone', reason: 'is not the zone as the schedule resolves it' };
  const slot = firstSlotMs({ spec: base.spec, schedule: parsed.schedule }, c.atMs);
  if (slot === undefined || slot !== c.nextFireAtMs[i])
    return { field: 'nextFireAtMs', reason: 'is not the first slot of the schedule' };
  return undefined;
}

function isMap(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isSafeInt(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x);
}
