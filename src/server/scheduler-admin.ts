/**
 * Job and tenant administration on one node: validates a request, computes what the leader must
 * put in the log (the first slot, the resume slot, the trigger time), routes it to the group that
 * owns the job, proposes it and turns the state machine's answer into a result or a typed error.
 * The test-only DebugService exposes it as JSON until the public API (tickraft.proto) does.
 *
 * A request for a group (or the meta group) this node does not lead fails with NotLeaderError
 * and the leader's id, so a client retries there.
 */
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import type { Clock } from '../base/clock.js';
import {
  compileJobSpec,
  firstSlotMs,
  requireFirstSlot,
  JOB_ID_PATTERN,
  type CompiledJobSpec,
} from '../api/job-spec.js';
import { validateSigningSecrets } from '../delivery/signing.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { hashShardKey } from '../placement/hash.js';
import { encodeMetaCommand, type MetaResult, type TenantRecord } from '../placement/meta-state.js';
import { lookupRange, splitRing, type RingRange } from '../placement/ring.js';
import { NotLeaderError } from '../raft/errors.js';
import { encodeSchedulerCommand, type SchedulerCommand } from '../scheduler/commands.js';
import type { Job, Run } from '../scheduler/model.js';
import type { ApplyResult } from '../scheduler/state-machine.js';
import type { TickraftNode } from './node.js';

export const CREATE_BATCH_MAX = 1000;

export interface CreateJobRequest {
  readonly jobId?: unknown;
  readonly requestId?: unknown;
  readonly spec?: unknown;
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
  constructor(
    private readonly node: TickraftNode,
    private readonly clock: Clock,
  ) {}

  /** The ring: from the meta group's map once known, else the flag plan. */
  ranges(): RingRange[] {
    const groups = [...this.node.meta.groups.values()].sort((a, b) => a.start - b.start);
    if (groups.length > 0)
      return groups.map((g) => ({ groupId: g.id, start: g.start, end: g.end }));
    return splitRing(this.node.config.groups, META_GROUP_ID + 1);
  }

  groupOf(jobId: string): number {
    return lookupRange(this.ranges(), hashShardKey(jobId)).groupId;
  }

  private requireLeader(groupId: number): void {
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
    };
    const r = (await this.node.host.propose(
      META_GROUP_ID,
      encodeMetaCommand({ op: 'put-tenant', tenant }),
    )) as MetaResult;
    if (!r.ok) throw new SchedulerAdminError(r.code, r.reason);
    return tenant;
  }

  async createJob(req: CreateJobRequest): Promise<Job> {
    const c = this.createCommand(req, this.clock.nowMs(), '');
    const r = await this.propose(c.jobId, c);
    return this.jobAfter(r.jobId ?? c.jobId);
  }

  /**
   * Creates many jobs (bulk registration, at most CREATE_BATCH_MAX): all are checked first and
   * none is proposed if any is invalid; then each group's jobs are proposed as one batch. This
   * node must lead every group involved.
   */
  async createJobs(reqs: unknown): Promise<{ created: number; duplicates: number }> {
    if (!Array.isArray(reqs) || reqs.length === 0 || reqs.length > CREATE_BATCH_MAX)
      throw new ValidationError('JOB_SPEC_INVALID', [
        { field: 'jobs', reason: `must be a list of 1 to ${CREATE_BATCH_MAX} jobs` },
      ]);
    const nowMs = this.clock.nowMs();
    const violations: FieldViolation[] = [];
    const byGroup = new Map<number, Uint8Array[]>();
    (reqs as CreateJobRequest[]).forEach((req, i) => {
      try {
        const c = this.createCommand(req, nowMs, `jobs[${i}].`);
        const groupId = this.groupOf(c.jobId);
        let list = byGroup.get(groupId);
        if (!list) byGroup.set(groupId, (list = []));
        list.push(encodeSchedulerCommand(c));
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        violations.push(...err.violations);
      }
    });
    if (violations.length > 0) throw new ValidationError('JOB_SPEC_INVALID', violations);
    for (const groupId of byGroup.keys()) this.requireLeader(groupId);
    const results = await Promise.all(
      [...byGroup].map(([groupId, datas]) => this.node.host.proposeBatch(groupId, datas)),
    );
    let created = 0;
    let duplicates = 0;
    for (const r of results.flat() as ApplyResult[]) {
      if (!r.ok) throw new SchedulerAdminError(r.code, r.reason);
      if (r.duplicate === true) duplicates++;
      else created++;
    }
    return { created, duplicates };
  }

  /** Validates a create request and computes its first slot; names fields under `prefix`. */
  private createCommand(
    req: CreateJobRequest,
    nowMs: number,
    prefix: string,
  ): Extract<SchedulerCommand, { op: 'create-job' }> {
    const jobId = typeof req.jobId === 'string' ? req.jobId : '';
    const violations: FieldViolation[] = [];
    if (!JOB_ID_PATTERN.test(jobId))
      violations.push({ field: `${prefix}jobId`, reason: `must match ${JOB_ID_PATTERN.source}` });
    let compiled: CompiledJobSpec | undefined;
    try {
      compiled = compileJobSpec(req.spec ?? {}, nowMs);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      for (const v of err.violations) violations.push({ ...v, field: `${prefix}spec.${v.field}` });
    }
    if (compiled && !this.node.meta.tenants.has(compiled.spec.tenant))
      violations.push({
        field: `${prefix}spec.tenant`,
        reason: `tenant ${compiled.spec.tenant} does not exist`,
      });
    if (violations.length > 0 || !compiled)
      throw new ValidationError('JOB_SPEC_INVALID', violations);
    return {
      op: 'create-job',
      atMs: nowMs,
      jobId,
      spec: compiled.spec,
      nextFireAtMs: requireFirstSlot(compiled, nowMs),
      requestId: typeof req.requestId === 'string' ? req.requestId : undefined,
    };
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
        if (!job) throw new SchedulerAdminError('JOB_NOT_FOUND', `job ${jobId} does not exist`);
        // Slots that passed while paused are not fired: the next one from now on is.
        const compiled = compileJobSpec(job, job.createdAtMs);
        // A slot already planned (recorded SKIPPED while paused, or not yet due) stays; one
        // that passed unplanned is not fired.
        const next =
          job.nextFireAtMs !== undefined && job.nextFireAtMs >= nowMs
            ? job.nextFireAtMs
            : firstSlotMs(compiled, nowMs);
        c = { op, atMs: nowMs, jobId, nextFireAtMs: next };
        break;
      }
      case 'trigger-job':
        c = { op, atMs: nowMs, jobId, slotMs: nowMs };
        break;
    }
    return this.propose(jobId, c);
  }

  /** The job and its runs as this node's replica holds them, after a ReadIndex. */
  async getJob(jobId: string): Promise<{ job: Job; runs: Run[] }> {
    const groupId = this.groupOf(jobId);
    const data = this.node.data.get(groupId);
    if (!data) throw new NotLeaderError(groupId, '');
    await this.node.host.read(groupId);
    const job = data.scheduler.jobs.get(jobId);
    if (!job) throw new SchedulerAdminError('JOB_NOT_FOUND', `job ${jobId} does not exist`);
    return { job, runs: data.scheduler.runsOf(jobId) };
  }

  private async propose(
    jobId: string,
    c: SchedulerCommand,
  ): Promise<Extract<ApplyResult, { ok: true }>> {
    const groupId = this.groupOf(jobId);
    this.requireLeader(groupId);
    const r = (await this.node.host.propose(groupId, encodeSchedulerCommand(c))) as ApplyResult;
    if (!r.ok) throw new SchedulerAdminError(r.code, r.reason);
    return r;
  }

  private jobAfter(jobId: string): Job {
    const job = this.node.data.get(this.groupOf(jobId))?.scheduler.jobs.get(jobId);
    if (!job) throw new SchedulerAdminError('JOB_NOT_FOUND', `job ${jobId} does not exist`);
    return job;
  }
}
