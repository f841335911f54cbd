/**
 * Check (f): job metadata is linearizable. Each job is a register whose state is absent or
 * { definition, version, paused, creating request id }; create, update, delete, pause, resume and
 * get are checked per job by the WGL search of chaos/checkers/linearizability.ts.
 *
 * What goes in, per job:
 * - ok operations, with what they returned (a JobRead is compared: definition, version, paused);
 * - `fail` answers that are observations: JOB_NOT_FOUND (absent), JOB_ALREADY_EXISTS (present),
 *   JOB_VERSION_CONFLICT (another version); other failures had no effect and are left out;
 * - `info` operations as unknown outcomes (they may take effect at any point after their call);
 * - bulk pause/resume/cancel of the job's tenant, as writes whose answer says nothing per job;
 * - the final read, as a get, when it found the job (a final absence is check (a)'s to report).
 *
 * Definitions are compared by the fields a user set, with the server's defaults filled in, so a
 * sent definition and the same one read back compare equal.
 */
import { assertNever } from '../../src/base/assert.js';
import {
  UNKNOWN_RETURN,
  checkLinearizability,
  describeViolation,
  type CheckOptions,
  type Model,
  type Operation,
} from '../checkers/linearizability.js';
import type { JobDefinition, JobRead } from '../history/format.js';
import { isJobRead, type HistoryContext, type Op } from './context.js';
import type { ViolationLog } from './violations.js';

/** The fields of a definition a read is compared on, defaults filled in. */
export function definitionKey(def: JobDefinition): string {
  return JSON.stringify([
    def.tenant,
    def.name ?? '',
    def.schedule.trim(),
    def.timezone ?? 'UTC',
    def.delivery ?? 'at_least_once',
    def.misfire?.policy ?? 'fire_once',
    def.overlap?.policy ?? 'allow',
    def.startAtMs ?? null,
    def.endAtMs ?? null,
  ]);
}

export interface JobState {
  readonly key: string;
  readonly version: number;
  readonly paused: boolean;
  readonly requestId: string | undefined;
}

export type JobInput =
  | {
      readonly op: 'create';
      readonly jobId: string;
      readonly key: string;
      readonly requestId: string | undefined;
    }
  | {
      readonly op: 'update';
      readonly jobId: string;
      readonly key: string;
      readonly expectedVersion: number | undefined;
    }
  | { readonly op: 'delete' | 'pause' | 'resume' | 'get'; readonly jobId: string }
  | { readonly op: 'bulk-pause' | 'bulk-resume' | 'bulk-cancel'; readonly jobId: string };

export interface ReadSummary {
  readonly key: string;
  readonly version: number;
  readonly paused: boolean;
}

export type JobOutput =
  | { readonly kind: 'ok'; readonly read: ReadSummary | null | undefined }
  | { readonly kind: 'not-found' | 'already-exists' | 'version-conflict' };

type Step = { ok: boolean; next: JobState | null };

function matches(read: ReadSummary | null | undefined, state: JobState | null): boolean {
  if (read === undefined) return true;
  if (read === null || state === null) return read === state;
  return read.key === state.key && read.version === state.version && read.paused === state.paused;
}

/** The effect of an operation that succeeded in `state` (legality checked by the caller). */
function effect(state: JobState | null, input: JobInput): JobState | null {
  switch (input.op) {
    case 'create':
      return state ?? { key: input.key, version: 1, paused: false, requestId: input.requestId };
    case 'update':
      return state && { ...state, key: input.key, version: state.version + 1 };
    case 'delete':
    case 'bulk-cancel':
      return null;
    case 'pause':
    case 'bulk-pause':
      return state && { ...state, paused: true };
    case 'resume':
    case 'bulk-resume':
      return state && { ...state, paused: false };
    case 'get':
      return state;
    default:
      return assertNever(input, 'job input');
  }
}

/** Whether the operation succeeds (rather than failing with an observation) in `state`. */
function succeeds(state: JobState | null, input: JobInput): boolean {
  switch (input.op) {
    case 'create':
      // A retried create with the first one's request id answers ok with the existing job.
      return (
        state === null || (input.requestId !== undefined && state.requestId === input.requestId)
      );
    case 'update':
      return (
        state !== null &&
        (input.expectedVersion === undefined || input.expectedVersion === state.version)
      );
    case 'delete':
    case 'pause':
    case 'resume':
      return state !== null;
    case 'get':
    case 'bulk-pause':
    case 'bulk-resume':
    case 'bulk-cancel':
      return true;
    default:
      return assertNever(input, 'job input');
  }
}

function stepJob(state: JobState | null, input: JobInput, output: JobOutput): Step {
  const ok = succeeds(state, input);
  switch (output.kind) {
    case 'ok': {
      if (!ok) return { ok: false, next: state };
      const next = effect(state, input);
      if (input.op === 'get') return { ok: matches(output.read, state), next };
      // Bulk answers say nothing about one job.
      if (input.op.startsWith('bulk-')) return { ok: true, next };
      return { ok: matches(output.read, next), next };
    }
    case 'not-found':
      return { ok: state === null, next: state };
    case 'already-exists':
      return { ok: input.op === 'create' && !ok, next: state };
    case 'version-conflict':
      return { ok: input.op === 'update' && state !== null && !ok, next: state };
    default:
      return assertNever(output, 'job output');
  }
}

function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function describeState(s: JobState | null): string {
  return s === null ? 'absent' : `v${s.version}${s.paused ? ' paused' : ''} ${s.key}`;
}

function describeRead(r: ReadSummary | null | undefined): string {
  if (r === undefined) return 'ok';
  return r === null ? 'absent' : `v${r.version}${r.paused ? ' paused' : ''} ${r.key}`;
}

export const jobRegisterModel: Model<JobState | null, JobInput, JobOutput> = {
  init: () => null,
  step: stepJob,
  stepUnobserved: (state, input) => (succeeds(state, input) ? effect(state, input) : state),
  isReadOnly: (input) => input.op === 'get',
  equal: (a, b) =>
    a === b ||
    (a !== null &&
      b !== null &&
      a.key === b.key &&
      a.version === b.version &&
      a.paused === b.paused &&
      a.requestId === b.requestId),
  hash: (s) =>
    s === null ? 0x9e3779b9 : hashString(`${s.key}|${s.version}|${s.paused}|${s.requestId ?? ''}`),
  partition: (history) => {
    const byJob = new Map<string, Operation<JobInput, JobOutput>[]>();
    for (const op of history) {
      const list = byJob.get(op.input.jobId);
      if (list) list.push(op);
      else byJob.set(op.input.jobId, [op]);
    }
    return [...byJob].map(([name, ops]) => ({ name, history: ops }));
  },
  describeOperation: (input, output) => {
    const what =
      input.op === 'create' || input.op === 'update'
        ? `${input.op}(${input.key})`
        : `${input.op}()`;
    if (output === undefined) return `${what} -> ?`;
    return `${what} -> ${output.kind === 'ok' ? describeRead(output.read) : output.kind}`;
  },
  describeState,
};

function summarize(read: JobRead | null): ReadSummary | null {
  return read === null
    ? null
    : { key: definitionKey(read.definition), version: read.version, paused: read.paused };
}

const OBSERVATION_CODES: Readonly<
  Record<string, 'not-found' | 'already-exists' | 'version-conflict'>
> = {
  JOB_NOT_FOUND: 'not-found',
  NOT_FOUND: 'not-found',
  JOB_ALREADY_EXISTS: 'already-exists',
  ALREADY_EXISTS: 'already-exists',
  JOB_VERSION_CONFLICT: 'version-conflict',
};

function inputOf(op: Op, jobId: string): JobInput | undefined {
  switch (op.f) {
    case 'create':
      return {
        op: 'create',
        jobId,
        key: definitionKey(op.invoke.definition!),
        requestId: op.invoke.requestId,
      };
    case 'update':
      return {
        op: 'update',
        jobId,
        key: definitionKey(op.invoke.definition!),
        expectedVersion: op.invoke.expectedVersion,
      };
    case 'delete':
    case 'pause':
    case 'resume':
    case 'get':
    case 'bulk-pause':
    case 'bulk-resume':
    case 'bulk-cancel':
      return { op: op.f, jobId };
    case 'list-runs':
      return undefined;
    default:
      return assertNever(op.f, 'op function');
  }
}

/** The job operations of the history in the checker's form; definite no-effect failures left out. */
export function jobOperations(ctx: HistoryContext): Operation<JobInput, JobOutput>[] {
  const out: Operation<JobInput, JobOutput>[] = [];
  for (const jobId of ctx.jobIds) {
    for (const op of ctx.actionsOn(jobId)) {
      const input = inputOf(op, jobId);
      if (input === undefined) continue;
      const base = { clientId: op.process, input, call: op.invokeT };
      if (op.outcome === 'info') {
        if (input.op !== 'get') out.push({ ...base, ret: UNKNOWN_RETURN });
        continue;
      }
      if (op.outcome === 'fail') {
        const kind = OBSERVATION_CODES[op.completion?.error?.code ?? ''];
        if (kind !== undefined) out.push({ ...base, ret: op.completeT, output: { kind } });
        continue;
      }
      const value = op.completion?.value;
      const read =
        input.op === 'get'
          ? summarize(isJobRead(value) ? value : null)
          : isJobRead(value)
            ? summarize(value)
            : undefined;
      out.push({ ...base, ret: op.completeT, output: { kind: 'ok', read } });
    }
    const final = ctx.finals.get(jobId);
    if (final && final.job !== null) {
      out.push({
        clientId: 'final',
        input: { op: 'get', jobId },
        call: final.t,
        ret: final.tDone,
        output: { kind: 'ok', read: summarize(final.job) },
      });
    }
  }
  return out;
}

export interface RegisterStats {
  readonly operations: number;
  readonly jobs: number;
  readonly unknownJobs: readonly string[];
  readonly steps: number;
}

export function checkJobRegister(
  ctx: HistoryContext,
  log: ViolationLog,
  options: CheckOptions = {},
): RegisterStats {
  const ops = jobOperations(ctx);
  const result = checkLinearizability(jobRegisterModel, ops, options);
  const unknownJobs: string[] = [];
  for (const p of result.partitions) {
    if (p.outcome === 'unknown') unknownJobs.push(p.name);
    if (p.outcome !== 'illegal') continue;
    const blocking = p.violation.blocking.operation;
    log.add({
      kind: 'job-read-not-linearizable',
      jobId: p.name,
      t: blocking.call,
      message: describeViolation(jobRegisterModel, p.violation),
    });
  }
  return {
    operations: ops.length,
    jobs: result.partitions.length,
    unknownJobs,
    steps: result.steps,
  };
}
