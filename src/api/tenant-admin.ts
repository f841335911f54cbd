/**
 * Tenants on the meta group's leader: create (a secret is generated when none is given), update
 * caps, rotate the signing secret with a grace period during which both secrets sign, and reads
 * after a ReadIndex. Every change is computed from the state this leader read and carries that
 * version, so two concurrent rotations cannot silently lose one (TENANT_CONFLICT → ABORTED).
 */
import {
  DEFAULT_RUN_RETENTION,
  RUN_RETENTION_BOUNDS,
  type RunRetention,
} from '../placement/run-retention.js';
import {
  DEFAULT_TENANT_LIMITS,
  TENANT_LIMIT_BOUNDS,
  type TenantLimits,
} from '../placement/tenant-limits.js';
import { randomBytes } from 'node:crypto';
import type { Clock } from '../base/clock.js';
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import { SECRET_PREFIX, validateSigningSecrets } from '../delivery/signing.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import {
  DEFAULT_PRIORITY_WEIGHT,
  encodeMetaCommand,
  type MetaCommand,
  type MetaResult,
  type TenantRecord,
} from '../placement/meta-state.js';
import { NotLeaderError } from '../raft/errors.js';
import type { ApiNode } from './api-node.js';
import { TENANT_ID_PATTERN } from './job-spec.js';

export const DEFAULT_TENANT_INFLIGHT_MAX = 10_000;
export const TENANT_INFLIGHT_MAX = 1_000_000;
export const DEFAULT_ROTATION_GRACE_MS = 24 * 3600_000;
export const PRIORITY_WEIGHT_MAX = 100;
export const ROTATION_GRACE_MS_MAX = 30 * 24 * 3600_000;

export class TenantAdminError extends TickraftError {
  override readonly name = 'TenantAdminError';
}

/** A fresh Standard Webhooks secret: 32 random bytes. */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * The secrets that sign now: during a rotation's grace both, after it only the current one.
 * Used by the delivering node with its own clock.
 */
export function signingSecretsAt(t: TenantRecord, nowMs: number): readonly string[] {
  if (t.previousSecretUntilMs !== undefined && nowMs >= t.previousSecretUntilMs)
    return t.signingSecrets.slice(0, 1);
  return t.signingSecrets;
}

export class TenantAdmin {
  constructor(
    private readonly node: ApiNode,
    private readonly clock: Clock,
  ) {}

  async create(req: {
    id: string;
    secret: string;
    inflightMax: number | undefined;
    priorityWeight?: number | undefined;
    retention?: RetentionChange | undefined;
    limits?: LimitsChange | undefined;
  }): Promise<{ tenant: TenantRecord; secret: string }> {
    const violations: FieldViolation[] = [];
    checkId(req.id, violations);
    const secret = req.secret === '' ? generateSecret() : req.secret;
    violations.push(...oneSecret(secret, 'signingSecret'));
    const inflightMax = req.inflightMax ?? DEFAULT_TENANT_INFLIGHT_MAX;
    checkInflight(inflightMax, violations);
    const priorityWeight = req.priorityWeight ?? DEFAULT_PRIORITY_WEIGHT;
    checkWeight(priorityWeight, violations);
    const retention = withBounded(
      DEFAULT_RUN_RETENTION,
      req.retention,
      RUN_RETENTION_BOUNDS,
      'retention',
      violations,
    );
    const limits = withBounded(
      DEFAULT_TENANT_LIMITS,
      req.limits,
      TENANT_LIMIT_BOUNDS,
      'limits',
      violations,
    );
    checkBurst(limits, violations);
    if (violations.length > 0) throw new ValidationError('TENANT_INVALID', violations);
    const tenant: TenantRecord = {
      id: req.id,
      signingSecrets: [secret],
      inflightMax,
      updatedAtMs: this.clock.nowMs(),
      priorityWeight,
      ...(retention === DEFAULT_RUN_RETENTION ? {} : { retention }),
      ...(limits === DEFAULT_TENANT_LIMITS ? {} : { limits }),
    };
    await this.propose({ op: 'create-tenant', tenant });
    return { tenant, secret };
  }

  async get(id: string): Promise<TenantRecord> {
    await this.readMeta();
    const t = this.node.meta.tenants.get(id);
    if (!t) throw new TenantAdminError('TENANT_NOT_FOUND', `tenant ${id} does not exist`);
    return t;
  }

  async list(afterId: string, limit: number): Promise<{ tenants: TenantRecord[]; more: boolean }> {
    await this.readMeta();
    const all = [...this.node.meta.tenants.values()]
      .filter((t) => t.id > afterId)
      .sort((a, b) => (a.id < b.id ? -1 : 1));
    return { tenants: all.slice(0, limit), more: all.length > limit };
  }

  /** Changes the fields given; absent ones keep their value. */
  async update(
    id: string,
    change: {
      inflightMax?: number | undefined;
      priorityWeight?: number | undefined;
      retention?: RetentionChange | undefined;
      limits?: LimitsChange | undefined;
    },
  ): Promise<TenantRecord> {
    const violations: FieldViolation[] = [];
    if (change.inflightMax !== undefined) checkInflight(change.inflightMax, violations);
    if (change.priorityWeight !== undefined) checkWeight(change.priorityWeight, violations);
    // Checked before the tenant is looked up, so that bad input is named whether it exists or not.
    checkBounded(change.retention, RUN_RETENTION_BOUNDS, 'retention', violations);
    checkBounded(change.limits, TENANT_LIMIT_BOUNDS, 'limits', violations);
    if (violations.length > 0) throw new ValidationError('TENANT_INVALID', violations);
    const current = this.current(id);
    const retention = withBounded(
      current.retention ?? DEFAULT_RUN_RETENTION,
      change.retention,
      RUN_RETENTION_BOUNDS,
      'retention',
      violations,
    );
    const limits = withBounded(
      current.limits ?? DEFAULT_TENANT_LIMITS,
      change.limits,
      TENANT_LIMIT_BOUNDS,
      'limits',
      violations,
    );
    // The burst is judged with the rate it would run with: the one sent, or the one stored.
    checkBurst(limits, violations);
    if (violations.length > 0) throw new ValidationError('TENANT_INVALID', violations);
    const tenant: TenantRecord = {
      ...current,
      inflightMax: change.inflightMax ?? current.inflightMax,
      priorityWeight: change.priorityWeight ?? current.priorityWeight,
      retention,
      limits,
      updatedAtMs: this.nextStamp(current),
    };
    await this.propose({ op: 'update-tenant', tenant, expectedUpdatedAtMs: current.updatedAtMs });
    return tenant;
  }

  /** The new secret becomes current; the previous current one signs until the grace ends. */
  async rotate(
    id: string,
    newSecret: string,
    graceMs: number | undefined,
  ): Promise<{ tenant: TenantRecord; secret: string }> {
    const violations: FieldViolation[] = [];
    const secret = newSecret === '' ? generateSecret() : newSecret;
    violations.push(...oneSecret(secret, 'newSecret'));
    const grace = graceMs ?? DEFAULT_ROTATION_GRACE_MS;
    if (!Number.isSafeInteger(grace) || grace < 0 || grace > ROTATION_GRACE_MS_MAX)
      violations.push({
        field: 'gracePeriodMs',
        reason: `must be from 0 to ${ROTATION_GRACE_MS_MAX} ms (30 days)`,
      });
    if (violations.length > 0) throw new ValidationError('TENANT_INVALID', violations);
    const current = this.current(id);
    if (current.signingSecrets.includes(secret))
      throw new ValidationError('TENANT_INVALID', [
        { field: 'newSecret', reason: 'is already one of the tenant’s secrets' },
      ]);
    const nowMs = this.clock.nowMs();
    const previous = current.signingSecrets[0];
    const tenant: TenantRecord = {
      ...current,
      signingSecrets: grace > 0 && previous !== undefined ? [secret, previous] : [secret],
      previousSecretUntilMs: grace > 0 ? nowMs + grace : undefined,
      updatedAtMs: this.nextStamp(current),
    };
    await this.propose({ op: 'update-tenant', tenant, expectedUpdatedAtMs: current.updatedAtMs });
    return { tenant, secret };
  }

  /** The tenant as this meta leader holds it (a proposal from here is checked on apply). */
  private current(id: string): TenantRecord {
    this.requireMetaLeader();
    const t = this.node.meta.tenants.get(id);
    if (!t) throw new TenantAdminError('TENANT_NOT_FOUND', `tenant ${id} does not exist`);
    return t;
  }

  /** updatedAtMs doubles as the tenant's version, so it must move even within a millisecond. */
  private nextStamp(current: TenantRecord): number {
    return Math.max(this.clock.nowMs(), current.updatedAtMs + 1);
  }

  private requireMetaLeader(): void {
    const g = this.node.host.groups.get(META_GROUP_ID);
    if (!g?.isLeader) throw new NotLeaderError(META_GROUP_ID, g?.leaderId ?? '');
  }

  private async readMeta(): Promise<void> {
    await this.node.host.read(META_GROUP_ID);
  }

  private async propose(c: MetaCommand): Promise<void> {
    this.requireMetaLeader();
    const r = (await this.node.host.propose(META_GROUP_ID, encodeMetaCommand(c))) as MetaResult;
    if (!r.ok) throw new TenantAdminError(r.code, r.reason);
  }
}

/** The violations of one secret sent in a singular field, named by that field (no `[0]`). */
function oneSecret(secret: string, field: string): FieldViolation[] {
  return validateSigningSecrets([secret], field).map((v) => ({ ...v, field }));
}

function checkId(id: string, out: FieldViolation[]): void {
  if (!TENANT_ID_PATTERN.test(id))
    out.push({
      field: 'tenantId',
      reason: 'must be 1-63 lowercase letters, digits, _ or -, starting with a letter or digit',
    });
}

/** Retention fields a request sets; absent ones keep their value. */
export type RetentionChange = { readonly [K in keyof RunRetention]?: number | undefined };
/** Limits a request sets; absent ones keep their value. */
export type LimitsChange = { readonly [K in keyof TenantLimits]?: number | undefined };

/** A violation, named `<prefix>.<field>`, per field of `change` outside its bounds. */
function checkBounded<K extends string>(
  change: { readonly [F in K]?: number | undefined } | undefined,
  bounds: Readonly<Record<K, readonly [number, number]>>,
  prefix: string,
  out: FieldViolation[],
): void {
  if (change === undefined) return;
  for (const key of Object.keys(bounds) as K[]) {
    const v = change[key];
    if (v === undefined) continue;
    const [lo, hi] = bounds[key];
    if (!Number.isSafeInteger(v) || v < lo || v > hi)
      out.push({ field: `${prefix}.${key}`, reason: `must be an integer from ${lo} to ${hi}` });
  }
}

/** `base` with the fields `change` sets (checked as checkBounded does); `base` itself if none. */
function withBounded<K extends string>(
  base: Readonly<Record<K, number>>,
  change: { readonly [F in K]?: number | undefined } | undefined,
  bounds: Readonly<Record<K, readonly [number, number]>>,
  prefix: string,
  out: FieldViolation[],
): Readonly<Record<K, number>> {
  if (change === undefined) return base;
  const before = out.length;
  checkBounded(change, bounds, prefix, out);
  if (out.length > before) return base;
  const next: Record<K, number> = { ...base };
  let changed = false;
  for (const key of Object.keys(bounds) as K[]) {
    const v = change[key];
    if (v === undefined) continue;
    next[key] = v;
    changed = true;
  }
  return changed ? next : base;
}

/** A bucket smaller than one second of its rate would refuse a steady caller at the rate. */
function checkBurst(limits: TenantLimits, out: FieldViolation[]): void {
  if (limits.writeBurst < limits.writesPerSecond)
    out.push({
      field: 'limits.writeBurst',
      reason: `must be at least limits.writes_per_second (${limits.writesPerSecond})`,
    });
}

function checkInflight(n: number, out: FieldViolation[]): void {
  if (!Number.isSafeInteger(n) || n < 1 || n > TENANT_INFLIGHT_MAX)
    out.push({ field: 'inflightMax', reason: `must be from 1 to ${TENANT_INFLIGHT_MAX}` });
}

function checkWeight(n: number, out: FieldViolation[]): void {
  if (!Number.isSafeInteger(n) || n < 1 || n > PRIORITY_WEIGHT_MAX)
    out.push({
      field: 'priorityWeight',
      reason: `must be an integer from 1 to ${PRIORITY_WEIGHT_MAX}`,
    });
}
