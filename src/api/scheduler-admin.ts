/**
 * Job and tenant administration on one node: validates a request, computes what the leader must
 * put in the log (the first slot, the resume slot, the trigger time), routes it to the group that
 * owns the job, proposes it and turns the state machine's answer into a result or a typed error.
 * The public services (src/api/services.ts) call it on the leader they routed to; the test-only
 * DebugService exposes it as JSON.
 *
 * A request for a group (or the meta group) this node does not lead fails with NotLeaderError
 * and the leader's id, so the router forwards or retries there. Reads run after a ReadIndex.
 *
 * Jobs are named by their key, `<tenant>/<job id>` (src/scheduler/job-key.ts): createCommand
 * makes it from the request's job id and `spec.tenant`; every other method takes it. Refusals
 * name the job as its caller knows it (`job "nightly"`), never by its key.
 */
import { assert } from '../base/assert.js';
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import type { Clock } from '../base/clock.js';
import {
  compileJobSpec,
  firstSlotMs,
  JobSpecCompiler,
  requireFirstSlot,
  JOB_ID_PATTERN,
  TENANT_ID_PATTERN,
  type CompiledJobSpec,
  type JobSpecInput,
} from './job-spec.js';
import { checkPackedCreates, PackedPartCache, type PackedCheckContext } from './packed-creates.js';
import { validateSigningSecrets } from '../delivery/signing.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { hashShardKey } from '../placement/hash.js';
import {
  DEFAULT_PRIORITY_WEIGHT,
  encodeMetaCommand,
  type MetaResult,
  type TenantRecord,
} from '../placement/meta-state.js';
import { lookupRange, splitRing, type RingRange } from '../placement/ring.js';
import { NotLeaderError } from '../raft/errors.js';
import {
  encodeSchedulerCommand,
  packCreates,
  type CreateJobCommand,
  type CreateJobsCommand,
  type FireIntent,
  type SchedulerCommand,
  type DeadRunFilter,
  type TenantJobsAction,
} from '../scheduler/commands.js';
import { fireIdOf, type Job, type Run } from '../scheduler/model.js';
import { jobIdOfKey, jobKeyOf, publicReason, splitJobKey } from '../scheduler/job-key.js';
import type { ApplyResult, SchedulerStateMachine } from '../scheduler/state-machine.js';
import type { ApiNode, DataGroupView } from './api-node.js';
import { RouteStaleError } from './router.js';
import { runOverridesIn } from './run-overrides.js';
import { answerUpstream, type UpstreamAnswer } from '../scheduler/upstream.js';
import type { RunCompletion } from '../scheduler/dispatcher.js';
import type { Msg } from './convert.js';

export const CREATE_BATCH_MAX = 1000;
export const BACKFILL_MAX = 1000;
export const REQUEST_ID_CHARS_MAX = 128;
/** Entries a bulk resume proposes in one group to catch jobs paused while it was planned. */
export const TENANT_RESUME_ROUNDS_MAX = 3;
/** Jobs one tenant-jobs resume entry lists: 4096 ids of ≤ 128 characters fit well in 1 MiB. */
export const TENANT_RESUMES_PER_ENTRY_MAX = 4096;
/** Slots the settle intents of one entry name, at most (~40 bytes each with its reason). */
const SETTLE_SLOTS_PER_ENTRY_MAX = 8192;

/**
 * Where a job resumes: a slot already planned (recorded SKIPPED while paused, or not yet due)
 * stays; slots that passed unplanned while paused are not fired, the next one from now is.
 */
export function resumeSlotMs(job: Job, nowMs: number): number | undefined {
  if (job.nextFireAtMs !== undefined && job.nextFireAtMs >= nowMs) return job.nextFireAtMs;
  return firstSlotMs(compileJobSpec(job, job.createdAtMs), nowMs);
}

/**
 * The job key of a fire id `<tenant>/<job id>:<slot ms>` (neither id holds a colon). The API
 * checked the fire id's shape (run-service.ts); this is for fire ids it passed on.
 */
export function jobKeyOfFireId(fireId: string): string {
  const at = fireId.lastIndexOf(':');
  assert(at > 0, `jobKeyOfFireId: ${JSON.stringify(fireId)} is not a fire id`);
  return fireId.slice(0, at);
}

/** NOT_FOUND for the job of `key`, worded as for any job id its caller names. */
export function jobNotFound(key: string): SchedulerAdminError {
  return new SchedulerAdminError(
    'JOB_NOT_FOUND',
    `job ${JSON.stringify(jobIdOfKey(key))} does not exist`,
  );
}

/** NOT_FOUND for a run, named by the fire id its caller gave. */
export function runNotFound(fireId: string): SchedulerAdminError {
  return new SchedulerAdminError('RUN_NOT_FOUND', `run ${fireId} does not exist`);
}

/** A refusal of the state machine, with its job keys named as their callers know them. */
function refusal(r: Extract<ApplyResult, { ok: false }>): SchedulerAdminError {
  return new SchedulerAdminError(r.code, publicReason(r.reason));
}

/**
 * The request id a create stores: scoped by the tenant, so that two tenants' equal request ids
 * never meet (the state machine treats it as an opaque string).
 */
export function scopedRequestId(tenant: string, requestId: string): string {
  return `${tenant}/${requestId}`;
}

export interface CreateJobRequest {
  readonly jobId?: unknown;
  readonly requestId?: unknown;
  readonly spec?: unknown;
}

export type { CreateJobCommand };

export interface CreateJobsResult {
  readonly created: number;
  readonly duplicates: number;
}

/** The created and duplicate counts of applied create-jobs entries; the first failure throws. */
function sumCreates(results: readonly unknown[]): CreateJobsResult {
  let created = 0;
  let duplicates = 0;
  for (const r of results as ApplyResult[]) {
    if (!r.ok) throw refusal(r);
    created += r.createdCount ?? 0;
    duplicates += r.duplicateCount ?? 0;
  }
  return { created, duplicates };
}

export class SchedulerAdminError extends TickraftError {
  override readonly name = 'SchedulerAdminError';
}

export interface PutTenantRequest {
  readonly id?: unknown;
  readonly signingSecrets?: unknown;
  readonly inflightMax?: unknown;
}

export class SchedulerAdmin {
  /** Definitions of forwarded create-jobs entries this node checked in full already. */
  private readonly checkedParts = new PackedPartCache();

  constructor(
    private readonly node: ApiNode,
    private readonly clock: Clock,
  ) {}

  /**
   * A compiler for the specs of one call made at `nowMs`, refusing targets this node's policy
   * forbids (`--allow-target`): every create and update goes through one.
   */
  compiler(nowMs: number): JobSpecCompiler {
    return new JobSpecCompiler(nowMs, { targetPolicy: this.node.config.delivery.targetPolicy });
  }

  /** The ring: from the meta group's map once known, else the flag plan. */
  ranges(): RingRange[] {
    const groups = [...this.node.meta.groups.values()].sort((a, b) => a.start - b.start);
    if (groups.length > 0)
      return groups.map((g) => ({ groupId: g.id, start: g.start, end: g.end }));
    return splitRing(this.node.config.groups, META_GROUP_ID + 1);
  }

  /** The group that owns the job of `key` (its key is what the ring hashes). */
  groupOf(key: string): number {
    return lookupRange(this.ranges(), hashShardKey(key)).groupId;
  }

  requireLeader(groupId: number): void {
    const g = this.node.host.groups.get(groupId);
    if (!g?.isLeader) throw new NotLeaderError(groupId, g?.leaderId ?? '');
  }

  async putTenant(req: PutTenantRequest): Promise<TenantRecord> {
    const violations = [];
    const id = typeof req.id === 'string' ? req.id : '';
    if (!/^[a-z0-9][a-z0-9_-]{0,62}$/.test(id))
      violations.push({ field: 'id', reason: 'must be 1-63 lowercase letters, digits, _ or -' });
    const secrets = Array.isArray(req.signingSecrets) ? req.signingSecrets : undefined;
    if (!secrets || !secrets.every((s): s is string => typeof s === 'string'))
      violations.push({ field: 'signingSecrets', reason: 'must be a list of 1-2 whsec_ secrets' });
    else violations.push(...validateSigningSecrets(secrets, 'signingSecrets'));
    const inflightMax = req.inflightMax ?? 1000;
    if (typeof inflightMax !== 'number' || !Number.isSafeInteger(inflightMax) || inflightMax < 1)
      violations.push({ field: 'inflightMax', reason: 'must be a positive integer' });
    if (violations.length > 0) throw new ValidationError('TENANT_INVALID', violations);
    this.requireLeader(META_GROUP_ID);
    const tenant: TenantRecord = {
      id,
      signingSecrets: secrets as string[],
      inflightMax: inflightMax as number,
      updatedAtMs: this.clock.nowMs(),
      priorityWeight: DEFAULT_PRIORITY_WEIGHT,
    };
    const r = (await this.node.host.propose(
      META_GROUP_ID,
      encodeMetaCommand({ op: 'put-tenant', tenant }),
    )) as MetaResult;
    if (!r.ok) throw new SchedulerAdminError(r.code, r.reason);
    return tenant;
  }

  async createJob(req: CreateJobRequest): Promise<Job> {
    return (await this.createJobDetailed(req)).job;
  }

  /** createJob, saying whether the request id was seen before (nothing new was created). */
  async createJobDetailed(req: CreateJobRequest): Promise<{ job: Job; duplicate: boolean }> {
    const c = this.createCommand(req, this.clock.nowMs(), '');
    const r = await this.propose(c.jobId, c);
    return { job: this.jobAfter(r.jobId ?? c.jobId), duplicate: r.duplicate === true };
  }

  /**
   * Replaces a job's definition; the next slot is computed afresh from now. With
   * `expectedVersion`, the state machine refuses it (JOB_VERSION_CONFLICT) unless the job is
   * still at that version when the entry applies.
   */
  async updateJob(jobId: string, spec: unknown, expectedVersion: number | undefined): Promise<Job> {
    const nowMs = this.clock.nowMs();
    const violations: FieldViolation[] = [];
    const { tenant } = splitJobKey(jobId);
    if (
      expectedVersion !== undefined &&
      (!Number.isSafeInteger(expectedVersion) || expectedVersion < 1)
    )
      violations.push({
        field: 'expectedVersion',
        reason: 'must be a positive integer when given',
      });
    const compiled = this.compileSpec(spec ?? {}, this.compiler(nowMs), '', violations);
    // A job belongs to its tenant for life: its runs, quotas and signing secrets are the tenant's
    // (and its key names the tenant).
    if (compiled && compiled.spec.tenant !== tenant)
      violations.push({
        field: 'spec.tenant',
        reason: `must be the job's tenant ${tenant}: a job belongs to its tenant for life (delete it and create it under the other tenant)`,
      });
    if (violations.length > 0 || !compiled)
      throw new ValidationError('JOB_SPEC_INVALID', violations);
    const r = await this.propose(
      jobId,
      {
        op: 'update-job',
        atMs: nowMs,
        jobId,
        spec: compiled.spec,
        nextFireAtMs: requireFirstSlot(compiled, nowMs, 'spec.schedule'),
        expectedVersion,
      },
      // An update bound to fail its version check settles nothing: an error changes nothing.
      expectedVersion === undefined || expectedVersion === this.versionOf(jobId)
        ? nowMs
        : undefined,
    );
    return this.jobAfter(r.jobId ?? jobId);
  }

  /** A manual run for every slot of the job's schedule in [fromMs, toMs), at most BACKFILL_MAX. */
  async backfillJob(jobId: string, fromMs: number, toMs: number, req: Msg): Promise<number[]> {
    const nowMs = this.clock.nowMs();
    const violations: FieldViolation[] = [];
    if (!Number.isSafeInteger(fromMs) || fromMs < 0)
      violations.push({ field: 'fromMs', reason: 'must be a time in UTC ms' });
    if (!Number.isSafeInteger(toMs) || toMs <= fromMs)
      violations.push({ field: 'toMs', reason: 'must be after from_ms' });
    else if (toMs > nowMs)
      violations.push({
        field: 'toMs',
        reason: 'must not be in the future (backfill is for past slots)',
      });
    if (violations.length > 0) throw new ValidationError('REQUEST_INVALID', violations);
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const job = this.node.data.get(groupId)?.scheduler.jobs.get(jobId);
    if (!job) throw jobNotFound(jobId);
    const overrides = runOverridesIn(req, job, this.node.config.delivery.targetPolicy);
    const compiled = compileJobSpec(job, job.createdAtMs);
    const slots: number[] = [];
    for (let at = fromMs; ;) {
      const slot = firstSlotMs(compiled, at);
      if (slot === undefined || slot >= toMs) break;
      if (slots.length === BACKFILL_MAX)
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'toMs', reason: `the range holds more than ${BACKFILL_MAX} slots; split it` },
        ]);
      slots.push(slot);
      at = slot + 1;
    }
    if (slots.length > 0)
      await this.propose(jobId, {
        op: 'backfill-job',
        atMs: nowMs,
        jobId,
        slots,
        ...(overrides !== undefined && { overrides }),
      });
    return slots;
  }

  /**
   * A manual run of the job now, outside its schedule, sending what `req` overrides
   * (run-overrides.ts) instead of the job's own.
   */
  async triggerJob(jobId: string, req: Msg): Promise<Run> {
    const nowMs = this.clock.nowMs();
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const job = this.node.data.get(groupId)?.scheduler.jobs.get(jobId);
    if (!job) throw jobNotFound(jobId);
    const overrides = runOverridesIn(req, job, this.node.config.delivery.targetPolicy);
    await this.propose(jobId, {
      op: 'trigger-job',
      atMs: nowMs,
      jobId,
      slotMs: nowMs,
      ...(overrides !== undefined && { overrides }),
    });
    return this.runAfter(fireIdOf(jobId, nowMs));
  }

  /** The job as this leader holds it right after a change it proposed applied. */
  jobNow(jobId: string): Job {
    return this.jobAfter(jobId);
  }

  /** Replays a DEAD run: it is scheduled again at once. */
  async replayRun(fireId: string): Promise<Run> {
    const jobId = jobKeyOfFireId(fireId);
    await this.propose(jobId, { op: 'replay-run', atMs: this.clock.nowMs(), fireId });
    return this.runAfter(fireId);
  }

  /**
   * A receiver's completion of a RUNNING run (RunService.CompleteRun), on the run's leader:
   * FENCING_TOKEN_STALE or RUN_WRONG_STATE when it does not name the run's current attempt.
   * `output` is the completion's output in full: the attempt record gets its excerpt
   * (`completion.output`), and this node keeps it beside the log, the record naming this node.
   */
  async completeRun(completion: RunCompletion, output?: string): Promise<Run> {
    const jobId = jobKeyOfFireId(completion.fireId);
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const outputs = this.node.runOutputs;
    const keep = output !== undefined && outputs.enabled;
    const c = this.node.scheduler.completionCommand(
      groupId,
      keep ? { ...completion, outputNode: this.node.id } : completion,
      this.clock.nowMs(),
    );
    if (c === undefined) throw new NotLeaderError(groupId, '', 'group not hosted on this node');
    await this.propose(jobId, c);
    const run = this.runAfter(completion.fireId);
    // Kept once the entry applied: a refused completion replaces nothing. A reader in between
    // gets the excerpt, which the entry already holds.
    const attempt = run.attempts.find((a) => a.token === completion.token);
    if (keep && attempt !== undefined) outputs.put(completion.fireId, attempt.attempt, output);
    return run;
  }

  /**
   * The attempt of the run this node's leader is making now, whose output is on this node (the
   * dispatcher's sendingAttempt); undefined when none or the group is not led here.
   */
  sendingAttempt(fireId: string): number | undefined {
    return this.node.scheduler.sendingAttempt(this.groupOf(jobKeyOfFireId(fireId)), fireId);
  }

  /**
   * A receiver still at work on a RUNNING run (RunService.Heartbeat): its deadline becomes now
   * plus `extendMs`, or plus its target's completion timeout.
   */
  async heartbeatRun(fireId: string, token: number, extendMs: number | undefined): Promise<Run> {
    const jobId = jobKeyOfFireId(fireId);
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const sm = this.node.data.get(groupId)?.scheduler;
    const run = sm?.runs.get(fireId);
    if (!run) throw runNotFound(fireId);
    const timeoutMs = extendMs ?? sm?.jobs.get(run.jobId)?.target.completionTimeoutMs;
    if (timeoutMs === undefined)
      throw new ValidationError('REQUEST_INVALID', [
        { field: 'extendMs', reason: "is required: the run's job no longer names a timeout" },
      ]);
    const nowMs = this.clock.nowMs();
    await this.propose(jobId, {
      op: 'heartbeat-run',
      atMs: nowMs,
      fireId,
      token,
      completeByMs: nowMs + timeoutMs,
    });
    return this.runAfter(fireId);
  }

  /**
   * What upstream job `jobKey`'s run for a downstream slot came to (upstream.ts), on the
   * upstream's leader after a ReadIndex: a 'missing' must not come from a replica that has not
   * applied the job yet.
   */
  async upstreamRun(jobKey: string, slotMs: number): Promise<UpstreamAnswer> {
    const sm = await this.readJobGroup(jobKey);
    return answerUpstream(sm, jobKey, slotMs);
  }

  /** Whether this node's leader of the run's group has an attempt of it in flight. */
  isInFlight(fireId: string): boolean {
    return this.node.scheduler.isInFlight(this.groupOf(jobKeyOfFireId(fireId)), fireId);
  }

  /** A run with every attempt, after a ReadIndex. */
  async getRun(fireId: string): Promise<Run> {
    const sm = await this.readJobGroup(jobKeyOfFireId(fireId));
    const run = sm.runs.get(fireId);
    if (!run) throw runNotFound(fireId);
    return run;
  }

  /**
   * The scheduler state of the group that owns `jobId`, current as of a ReadIndex; ROUTE_STALE
   * when that group split the job away since this node's map was read (the router retries).
   */
  async readJobGroup(jobId: string): Promise<SchedulerStateMachine> {
    const groupId = this.groupOf(jobId);
    const data = this.node.data.get(groupId);
    if (!data) throw new NotLeaderError(groupId, '', 'group not hosted on this node');
    await this.node.host.read(groupId);
    requireOwned(data, groupId, jobId);
    return data.scheduler;
  }

  /** The scheduler state of `groupId` on this node, current as of a ReadIndex. */
  async readGroup(groupId: number): Promise<SchedulerStateMachine> {
    const data = this.node.data.get(groupId);
    if (!data) throw new NotLeaderError(groupId, '', 'group not hosted on this node');
    await this.node.host.read(groupId);
    return data.scheduler;
  }

  /**
   * Creates many jobs (bulk registration, at most CREATE_BATCH_MAX): all are checked first and
   * none is proposed if any is invalid; then each group's jobs are proposed as one batch. This
   * node must lead every group involved.
   */
  async createJobs(reqs: unknown): Promise<CreateJobsResult> {
    if (!Array.isArray(reqs) || reqs.length === 0 || reqs.length > CREATE_BATCH_MAX)
      throw new ValidationError('JOB_SPEC_INVALID', [
        { field: 'jobs', reason: `must be a list of 1 to ${CREATE_BATCH_MAX} jobs` },
      ]);
    const nowMs = this.clock.nowMs();
    const compiler = this.compiler(nowMs);
    const violations: FieldViolation[] = [];
    const commands: CreateJobCommand[] = [];
    const firstOf = new Map<string, number>();
    (reqs as CreateJobRequest[]).forEach((req, i) => {
      try {
        const c = this.createCommand(req, nowMs, `jobs[${i}].`, compiler);
        const first = firstOf.get(c.jobId);
        if (first !== undefined)
          violations.push({
            field: `jobs[${i}].jobId`,
            reason: `is the id of jobs[${first}] too (ids must differ in a batch)`,
          });
        firstOf.set(c.jobId, first ?? i);
        commands.push(c);
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        violations.push(...err.violations);
      }
    });
    if (violations.length > 0) throw new ValidationError('JOB_SPEC_INVALID', violations);
    return this.proposeCreates(commands);
  }

  /**
   * Proposes creates that createCommand produced (validated, first slot computed): each group's
   * as one create-jobs entry (cut by size only when its definitions are large), which applies
   * all or nothing; resolves once all are committed and applied. This node must lead every group
   * involved: none is proposed otherwise.
   */
  async proposeCreates(commands: readonly CreateJobCommand[]): Promise<CreateJobsResult> {
    const ranges = this.ranges();
    const byGroup = new Map<number, CreateJobCommand[]>();
    for (const c of commands) {
      const groupId = lookupRange(ranges, hashShardKey(c.jobId)).groupId;
      let list = byGroup.get(groupId);
      if (!list) byGroup.set(groupId, (list = []));
      list.push(c);
    }
    for (const groupId of byGroup.keys()) this.requireLeader(groupId);
    const results = await Promise.all(
      [...byGroup].map(([groupId, creates]) =>
        this.node.host.proposeBatch(
          groupId,
          // A copy of its own: the log keeps entries in memory until the next snapshot, and a
          // view would keep msgpackr's whole shared block alive with it.
          packCreates(creates).map((c) => encodeSchedulerCommand(c).slice()),
        ),
      ),
    );
    return sumCreates(results.flat());
  }

  /**
   * Proposes create-jobs entries another node checked and packed (NodeService.GroupCreateJobs)
   * for `groupId`, which this node must lead: each is checked again from its packed form
   * (packed-creates.ts), none is proposed unless all pass, and each is proposed as the bytes it
   * came in. Resolves once all are committed and applied.
   */
  async proposePacked(
    groupId: number,
    commands: readonly CreateJobsCommand[],
    entries: readonly Uint8Array[],
  ): Promise<CreateJobsResult> {
    this.requireLeader(groupId);
    const ctx: PackedCheckContext = {
      groupId,
      ranges: this.ranges(),
      tenantExists: (t) => this.node.meta.tenants.has(t),
      requestIdCharsMax: REQUEST_ID_CHARS_MAX,
      nowMs: this.clock.nowMs(),
      checkedParts: this.checkedParts,
      targetPolicy: this.node.config.delivery.targetPolicy,
    };
    commands.forEach((c, k) => checkPackedCreates(c, ctx, `entries[${k}].`));
    return sumCreates(await this.node.host.proposeBatch(groupId, entries));
  }

  /**
   * Validates a create request and computes its first slot; names fields under `prefix`. The
   * jobs of one bulk call share a `compiler` (this.compiler(nowMs)), which checks what they have
   * in common once.
   */
  createCommand(
    req: CreateJobRequest,
    nowMs: number,
    prefix: string,
    compiler: JobSpecCompiler = this.compiler(nowMs),
  ): CreateJobCommand {
    assert(compiler.nowMs === nowMs, 'createCommand: the compiler was made at another time');
    assert(
      compiler.options.targetPolicy === this.node.config.delivery.targetPolicy,
      "createCommand: the compiler does not check targets with this node's policy",
    );
    const jobId = typeof req.jobId === 'string' ? req.jobId : '';
    const violations: FieldViolation[] = [];
    if (!JOB_ID_PATTERN.test(jobId))
      violations.push({ field: `${prefix}jobId`, reason: `must match ${JOB_ID_PATTERN.source}` });
    if (
      req.requestId !== undefined &&
      (typeof req.requestId !== 'string' || req.requestId.length > REQUEST_ID_CHARS_MAX)
    )
      violations.push({
        field: `${prefix}requestId`,
        reason: `must be a string of at most ${REQUEST_ID_CHARS_MAX} characters`,
      });
    const compiled = this.compileSpec(req.spec ?? {}, compiler, prefix, violations);
    if (violations.length > 0 || !compiled)
      throw new ValidationError('JOB_SPEC_INVALID', violations);
    const { tenant } = compiled.spec;
    assert(TENANT_ID_PATTERN.test(tenant), 'createCommand: compileJobSpec passed a bad tenant');
    return {
      op: 'create-job',
      atMs: nowMs,
      jobId: jobKeyOf(tenant, jobId),
      spec: compiled.spec,
      nextFireAtMs: requireFirstSlot(compiled, nowMs, `${prefix}spec.schedule`),
      requestId:
        typeof req.requestId === 'string' && req.requestId !== ''
          ? scopedRequestId(tenant, req.requestId)
          : undefined,
    };
  }

  /** compileJobSpec plus the tenant's existence; violations go to `out` under `<jobPrefix>spec.`. */
  private compileSpec(
    spec: unknown,
    compiler: JobSpecCompiler,
    jobPrefix: string,
    out: FieldViolation[],
  ): CompiledJobSpec | undefined {
    // Field names are built only for violations: most jobs have none.
    let compiled: CompiledJobSpec | undefined;
    try {
      compiled = compiler.compile(spec as JobSpecInput);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      for (const v of err.violations) out.push({ ...v, field: `${jobPrefix}spec.${v.field}` });
    }
    // Named even when other fields are bad, so one round trip shows every problem.
    const tenant = (spec as { tenant?: unknown } | undefined)?.tenant;
    const tenantMalformed = out.some((v) => v.field === `${jobPrefix}spec.tenant`);
    if (typeof tenant === 'string' && !tenantMalformed && !this.node.meta.tenants.has(tenant))
      out.push({
        field: `${jobPrefix}spec.tenant`,
        reason: `tenant ${tenant} does not exist (create it first)`,
      });
    return compiled;
  }

  async jobCommand(
    op: 'pause-job' | 'resume-job' | 'delete-job' | 'trigger-job',
    jobId: string,
  ): Promise<ApplyResult> {
    const nowMs = this.clock.nowMs();
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const sm = this.node.data.get(groupId)!.scheduler;
    let c: SchedulerCommand;
    switch (op) {
      case 'pause-job':
      case 'delete-job':
        c = { op, atMs: nowMs, jobId };
        break;
      case 'resume-job': {
        const job = sm.jobs.get(jobId);
        if (!job) throw jobNotFound(jobId);
        c = { op, atMs: nowMs, jobId, nextFireAtMs: resumeSlotMs(job, nowMs) };
        break;
      }
      case 'trigger-job':
        c = { op, atMs: nowMs, jobId, slotMs: nowMs };
        break;
    }
    // A pause or resume recomputes what comes next, and a delete ends the schedule: overdue
    // slots are recorded first (a delete then cancels them), so none is left without a run.
    return this.propose(jobId, c, op === 'trigger-job' ? undefined : nowMs);
  }

  /**
   * One group's share of a bulk pause, resume or delete of a tenant's jobs: one tenant-jobs
   * entry. A resume lists the paused jobs this leader holds with their next slot; jobs paused
   * meanwhile (not listed, still paused after the entry) get another entry, a bounded number of
   * times.
   */
  async tenantJobs(
    groupId: number,
    tenant: string,
    action: TenantJobsAction,
    deadRuns?: DeadRunFilter,
  ): Promise<{ jobs: number; changed: number }> {
    this.requireLeader(groupId);
    const sm = this.node.data.get(groupId)!.scheduler;
    let changed = 0;
    for (let round = 0; ; round++) {
      const nowMs = this.clock.nowMs();
      const resumes =
        action === 'resume'
          ? sm
              .jobsOfTenant(tenant)
              .filter((j) => j.paused)
              .map((j) => ({ jobId: j.id, nextFireAtMs: resumeSlotMs(j, nowMs) }))
          : [];
      // A resume of many jobs is split so that each entry stays well under Raft's entry bound;
      // the entries are proposed as one batch and apply in order.
      const datas: Uint8Array[] = [];
      // As for one job: overdue slots are recorded by the old state first (propose()); a
      // cancel then cancels them.
      // A purge changes no job: nothing to settle first.
      const intents =
        action === 'purge-dead'
          ? []
          : sm.jobs
              .idsOfTenant(tenant)
              .map((id) => this.node.scheduler.overdueIntent(groupId, id, nowMs))
              .filter((i) => i !== undefined);
      datas.push(...this.settleEntries(groupId, intents, nowMs));
      for (let i = 0; i === 0 || i < resumes.length; i += TENANT_RESUMES_PER_ENTRY_MAX) {
        const c: SchedulerCommand = {
          op: 'tenant-jobs',
          atMs: nowMs,
          tenant,
          action,
          resumes: resumes.slice(i, i + TENANT_RESUMES_PER_ENTRY_MAX),
          ...(action === 'purge-dead' ? { deadRuns: deadRuns ?? {} } : {}),
        };
        datas.push(encodeSchedulerCommand(c));
      }
      const results = (await this.node.host.proposeBatch(groupId, datas)) as ApplyResult[];
      for (const r of results) {
        if (!r.ok) throw refusal(r);
        changed += r.changedCount ?? 0;
      }
      // The last entry sees the earlier chunks resumed: what it finds paused and unlisted was
      // paused after this leader read the state.
      const last = results[results.length - 1];
      const unlisted = last?.ok === true ? (last.unlistedCount ?? 0) : 0;
      if (unlisted === 0 || round + 1 >= TENANT_RESUME_ROUNDS_MAX)
        return { jobs: last?.ok === true ? (last.jobCount ?? 0) : 0, changed };
      this.requireLeader(groupId);
    }
  }

  /** The job and its runs as this node's replica holds them, after a ReadIndex. */
  async getJob(jobId: string): Promise<{ job: Job; runs: Run[] }> {
    const groupId = this.groupOf(jobId);
    const data = this.node.data.get(groupId);
    if (!data) throw new NotLeaderError(groupId, '');
    await this.node.host.read(groupId);
    requireOwned(data, groupId, jobId);
    const job = data.scheduler.jobs.get(jobId);
    if (!job) throw jobNotFound(jobId);
    return { job, runs: data.scheduler.runsOf(jobId) };
  }

  /**
   * Proposes `c` for the job's group. With `settleAtMs`, a change of the job that recomputes its
   * next slot: the job's overdue slots (due, not yet planned, as after an outage) are recorded
   * first by their misfire rules, in the same batch, so that none is left without a run.
   */
  private async propose(
    jobId: string,
    c: SchedulerCommand,
    settleAtMs?: number,
  ): Promise<Extract<ApplyResult, { ok: true }>> {
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const intent =
      settleAtMs === undefined
        ? undefined
        : this.node.scheduler.overdueIntent(groupId, jobId, settleAtMs);
    let r: ApplyResult;
    if (intent === undefined) {
      r = (await this.node.host.propose(groupId, encodeSchedulerCommand(c))) as ApplyResult;
    } else {
      const datas = [...this.settleEntries(groupId, [intent], c.atMs), encodeSchedulerCommand(c)];
      const results = (await this.node.host.proposeBatch(groupId, datas)) as ApplyResult[];
      r = results[results.length - 1]!;
    }
    if (!r.ok) throw refusal(r);
    return r;
  }

  /**
   * `fire-intents` entries recording overdue slots (GroupDispatcher.overdueIntent), cut by size:
   * an intent may name up to 1000 slots, and an entry must stay well under Raft's 1 MiB bound.
   */
  private settleEntries(
    groupId: number,
    intents: readonly FireIntent[],
    atMs: number,
  ): Uint8Array[] {
    const term = this.node.host.groups.get(groupId)?.node.raft.term ?? 0;
    const out: Uint8Array[] = [];
    let chunk: FireIntent[] = [];
    let chunkSlots = 0;
    const flush = (): void => {
      if (chunk.length === 0) return;
      const c: SchedulerCommand = { op: 'fire-intents', atMs, term, intents: chunk };
      out.push(encodeSchedulerCommand(c));
      chunk = [];
      chunkSlots = 0;
    };
    for (const intent of intents) {
      const slots = intent.slots.length + intent.notFired.length + 1;
      if (chunkSlots + slots > SETTLE_SLOTS_PER_ENTRY_MAX) flush();
      chunk.push(intent);
      chunkSlots += slots;
    }
    flush();
    return out;
  }

  private versionOf(jobId: string): number | undefined {
    return this.node.data.get(this.groupOf(jobId))?.scheduler.jobs.get(jobId)?.version;
  }

  private runAfter(fireId: string): Run {
    const run = this.node.data
      .get(this.groupOf(jobKeyOfFireId(fireId)))
      ?.scheduler.runs.get(fireId);
    if (!run) throw runNotFound(fireId);
    return run;
  }

  private jobAfter(jobId: string): Job {
    const job = this.node.data.get(this.groupOf(jobId))?.scheduler.jobs.get(jobId);
    if (!job) throw jobNotFound(jobId);
    return job;
  }
}

/** ROUTE_STALE when the group's own state says the job of key `jobId` was split away from it. */
function requireOwned(data: DataGroupView, groupId: number, jobId: string): void {
  if (!data.owns(jobId))
    throw new RouteStaleError(
      'ROUTE_STALE',
      `job ${JSON.stringify(jobIdOfKey(jobId))} is no longer in group ${groupId} (its range was split); routing again`,
    );
}
