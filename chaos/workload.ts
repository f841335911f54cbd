/**
 * The chaos workload: logical client processes that create, update, pause, resume, delete, get
 * and list the runs of many tenants' jobs through the public API, in parallel, while nemeses
 * run; every operation is recorded invoke → ok / fail / info exactly as chaos/history/format.ts
 * says, and the run ends with a final read of every job ever touched.
 *
 * - Each client process owns its jobs, so one job sees one operation at a time from its owner
 *   (the linearizability search stays small); a sweeper process reads every job's runs often
 *   enough that no slot leaves the cluster's retention unobserved.
 * - `fail` only for answers that prove no effect (INVALID_ARGUMENT family, JOB_NOT_FOUND,
 *   JOB_ALREADY_EXISTS, JOB_VERSION_CONFLICT); everything else (deadline, UNAVAILABLE after a
 *   forward, reset) is `info`, and the process id is retired: the thread goes on under a new id.
 * - Schedules: `every Ns` (1–5 s) with an explicit anchorMs, cron with seconds, one-off `at`;
 *   both delivery semantics; all three misfire policies. All choices come from one seed.
 * - Targets: the sink, or (with `workerPool`) for a quarter of the jobs the chaos worker.
 */
import { ApiCallError, type ApiClient } from '../src/api/client.js';
import { SeededRand } from '../src/base/rand.js';
import { formatInstant } from '../src/schedule/civil.js';
import type {
  CompletionRecord,
  FinalReadRecord,
  InvokeRecord,
  JobDefinition,
  JobRead,
  MisfirePolicyName,
  OpFunction,
  OpValue,
  RunRead,
  RunStatus,
  RunsRead,
} from './history/format.js';
import type { HistoryWriter } from './history/jsonl.js';

type Obj = Record<string, unknown>;

/** Answers that prove the request changed nothing (format.ts: `fail`). */
const DEFINITE_FAILURES = new Set([
  'JOB_NOT_FOUND',
  'JOB_ALREADY_EXISTS',
  'JOB_VERSION_CONFLICT',
  'JOB_SPEC_INVALID',
  'REQUEST_INVALID',
  'TENANT_INVALID',
  'TENANT_NOT_FOUND',
]);

/**
 * Whether a failed call certainly had no effect: a read never has one; a write answered with a
 * definite code; or a request that never left the client (the node refused the connection: a
 * killed node). GROUP_NO_LEADER is not definite: the router may have forwarded a first attempt.
 */
function definite(f: OpFunction, code: string, message: string): boolean {
  if (f === 'get' || f === 'list-runs') return true;
  if (DEFINITE_FAILURES.has(code)) return true;
  return code === 'UNAVAILABLE' && /No connection established.*ECONNREFUSED/.test(message);
}

const CRONS = [
  '* * * * * *',
  '*/2 * * * * *',
  '*/3 * * * * *',
  '*/5 * * * * *',
  '0,20,40 * * * * *',
];
const MISFIRES: readonly MisfirePolicyName[] = ['fire_all', 'fire_once', 'skip'];

export interface WorkloadOptions {
  readonly seed: number;
  /** One client per node API address; each operation goes to one of them, drawn. */
  readonly clients: readonly ApiClient[];
  readonly tenants: readonly string[];
  readonly sinkUrl: string;
  readonly history: HistoryWriter;
  /** Driver time, ms since the run start. */
  readonly now: () => number;
  readonly startedAtEpochMs: number;
  /** Client processes (threads) that write; default 6. */
  readonly processes?: number;
  /** Live jobs each process keeps; default 5. */
  readonly jobsPerProcess?: number;
  /** Deadline of each call; default 4000 ms. */
  readonly callTimeoutMs?: number;
  /**
   * With a pool, one job in four (by a hash of its id, so an update keeps it) targets
   * `worker:<pool>` instead of the sink: its runs are leased to the chaos worker (chaos/worker.ts).
   */
  readonly workerPool?: string;
}

interface OwnedJob {
  readonly jobId: string;
  readonly requestId: string;
  definition: JobDefinition;
  /** Last version known for sure; undefined after an `info` write. */
  version: number | undefined;
  paused: boolean | undefined;
  writes: number;
}

export interface WorkloadCounts {
  ok: number;
  fail: number;
  info: number;
  jobs: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Strips a proto enum prefix: `MISFIRE_POLICY_FIRE_ALL` → `fire_all`; UNSPECIFIED → undefined. */
function enumName(value: unknown, prefix: string): string | undefined {
  if (typeof value !== 'string' || !value.startsWith(prefix)) return undefined;
  const name = value.slice(prefix.length).toLowerCase();
  return name === 'unspecified' ? undefined : name;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' ? v : undefined;
}

/** The API's Job message as the history's JobRead. */
export function jobReadOf(job: Obj): JobRead {
  const spec = (job['spec'] ?? {}) as Obj;
  const misfire = (spec['misfire'] ?? {}) as Obj;
  const overlap = (spec['overlap'] ?? {}) as Obj;
  const retry = (spec['retry'] ?? {}) as Obj;
  const definition = compact<JobDefinition>({
    tenant: String(spec['tenant']),
    name: typeof spec['name'] === 'string' ? spec['name'] : '',
    schedule: String(spec['schedule']),
    timezone: typeof spec['timezone'] === 'string' ? spec['timezone'] : undefined,
    anchorMs: num(spec['anchorMs']),
    delivery: enumName(spec['delivery'], 'DELIVERY_SEMANTICS_'),
    misfire: {
      policy: enumName(misfire['policy'], 'MISFIRE_POLICY_') ?? 'fire_once',
      fireAllCap: num(misfire['fireAllCap']),
      catchUpWindowMs: num(misfire['catchUpWindowMs']),
    },
    overlap: {
      policy: enumName(overlap['policy'], 'OVERLAP_POLICY_') ?? 'allow',
      bufferCap: num(overlap['bufferCap']),
    },
    startAtMs: num(spec['startAtMs']),
    endAtMs: num(spec['endAtMs']),
    remainingFires: num(spec['remainingFires']),
    retryMaxAttempts: num(retry['maxAttempts']),
  });
  return compact<JobRead>({
    jobId: String(job['id']),
    version: Number(job['version']),
    paused: job['paused'] === true,
    definition,
    nextFireAtMs: num(job['nextFireAtMs']),
    updatedAtMs: num(job['updatedAtMs']),
  });
}

/** A JSON copy without the undefined fields (the history never holds `undefined`). */
function compact<T>(value: Record<string, unknown>): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function runReadOf(run: Obj): RunRead {
  const status = String(run['status']).replace(/^RUN_STATUS_/, '') as RunStatus;
  const reason =
    typeof run['reason'] === 'string' && run['reason'] !== '' ? run['reason'] : undefined;
  return {
    slotMs: Number(run['slotMs']),
    status,
    ...(reason === undefined ? {} : { reason }),
    attempts: Array.isArray(run['attempts']) ? run['attempts'].length : 0,
    ...(run['manual'] === true ? { manual: true } : {}),
  };
}

/** The pool of the chaos worker (chaos/worker.ts), which worker jobs target as `worker:chaos`. */
export const CHAOS_POOL = 'chaos';

/** Whether a job is one of the quarter leased to workers: FNV-1a of its id, not its group's hash. */
export function isWorkerJob(jobId: string): boolean {
  let h = 2166136261;
  for (let i = 0; i < jobId.length; i++) h = Math.imul(h ^ jobId.charCodeAt(i), 16777619) >>> 0;
  return h % 4 === 0;
}

/** The API spec for a definition (the enums as the proto names them). */
function specOf(
  def: JobDefinition,
  jobId: string,
  o: Pick<WorkloadOptions, 'sinkUrl' | 'workerPool'>,
): Obj {
  const url =
    o.workerPool !== undefined && isWorkerJob(jobId)
      ? `worker:${o.workerPool}`
      : `${o.sinkUrl}/hook`;
  return {
    tenant: def.tenant,
    name: def.name,
    schedule: def.schedule,
    ...(def.anchorMs === undefined ? {} : { anchorMs: def.anchorMs }),
    target: { url },
    delivery:
      def.delivery === 'at_most_once'
        ? 'DELIVERY_SEMANTICS_AT_MOST_ONCE'
        : 'DELIVERY_SEMANTICS_AT_LEAST_ONCE',
    misfire: {
      policy: `MISFIRE_POLICY_${(def.misfire?.policy ?? 'fire_once').toUpperCase()}`,
      ...(def.misfire?.fireAllCap === undefined ? {} : { fireAllCap: def.misfire.fireAllCap }),
    },
    overlap: { policy: 'OVERLAP_POLICY_ALLOW' },
  };
}

export class Workload {
  private readonly rand: SeededRand;
  private nextProcess = 0;
  private nextOp = 0;
  private nextJob = 0;
  /** Every job id any operation named: each gets a final read. */
  readonly touched = new Set<string>();
  private readonly live = new Set<string>();
  /**
   * Each job's tenant, from its create on: job ids are unique per tenant, so every call names
   * the job by both. (The workload's ids are unique across tenants too: `c<process>-j<n>`.)
   */
  private readonly tenantOfJob = new Map<string, string>();
  readonly counts: WorkloadCounts = { ok: 0, fail: 0, info: 0, jobs: 0 };
  private stopping = false;

  constructor(private readonly o: WorkloadOptions) {
    this.rand = new SeededRand(o.seed);
  }

  /** Runs the client processes and the sweeper until `durationMs` has passed. */
  async run(durationMs: number): Promise<void> {
    const until = this.o.now() + durationMs;
    const threads = this.o.processes ?? 6;
    const work: Promise<void>[] = [];
    for (let i = 0; i < threads; i++) work.push(this.clientThread(i, until, this.rand.fork()));
    work.push(this.sweeper(until, this.rand.fork()));
    await Promise.all(work);
  }

  stop(): void {
    this.stopping = true;
  }

  private client(rand: SeededRand): ApiClient {
    return this.o.clients[rand.int(this.o.clients.length)]!;
  }

  /** What names a job in a request: its id and its tenant. */
  private named(jobId: string): { jobId: string; tenant: string } {
    return { jobId, tenant: this.tenantOfJob.get(jobId) ?? '' };
  }

  private newDefinition(rand: SeededRand, tenant: string, name: string): JobDefinition {
    const nowEpoch = Math.round(this.o.startedAtEpochMs + this.o.now());
    const kind = rand.int(10);
    let schedule: string;
    let anchorMs: number | undefined;
    if (kind < 5) {
      schedule = `every ${1 + rand.int(5)}s`;
      anchorMs = nowEpoch + 500 + rand.int(1500);
    } else if (kind < 8) {
      schedule = CRONS[rand.int(CRONS.length)]!;
    } else {
      schedule = `at ${formatInstant(nowEpoch + 3000 + rand.int(30_000))}`;
    }
    const policy = MISFIRES[rand.int(MISFIRES.length)]!;
    return {
      tenant,
      name,
      schedule,
      ...(anchorMs === undefined ? {} : { anchorMs }),
      delivery: rand.chance(0.3) ? 'at_most_once' : 'at_least_once',
      misfire: policy === 'fire_all' ? { policy, fireAllCap: 20 } : { policy },
    };
  }

  /**
   * One operation: invoke record, the call, completion record. Returns the value on ok, or the
   * completion type with the error code.
   */
  private async op(
    proc: { id: number },
    f: OpFunction,
    jobId: string,
    call: () => Promise<OpValue | undefined>,
    extra: Partial<InvokeRecord> = {},
  ): Promise<{ type: 'ok' | 'fail' | 'info'; value?: OpValue; code?: string }> {
    const opId = ++this.nextOp;
    this.touched.add(jobId);
    this.o.history.append({
      type: 'invoke',
      t: this.o.now(),
      process: proc.id,
      opId,
      f,
      jobId,
      ...extra,
    });
    const done = (r: Omit<CompletionRecord, 't' | 'process' | 'opId' | 'f' | 'jobId'>): void =>
      this.o.history.append({
        ...r,
        t: this.o.now(),
        process: proc.id,
        opId,
        f,
        jobId,
      });
    try {
      const value = await call();
      done(value === undefined ? { type: 'ok' } : { type: 'ok', value });
      this.counts.ok++;
      return { type: 'ok', ...(value === undefined ? {} : { value }) };
    } catch (err) {
      const code = err instanceof ApiCallError ? err.code : 'CLIENT_ERROR';
      const message = err instanceof Error ? err.message.slice(0, 200) : String(err);
      if (f === 'get' && code === 'JOB_NOT_FOUND') {
        done({ type: 'ok', value: null });
        this.counts.ok++;
        return { type: 'ok', value: null };
      }
      const type = definite(f, code, message) ? 'fail' : 'info';
      done({ type, error: { code, message } });
      this.counts[type]++;
      // A process is retired after `info`: the thread continues under a new id.
      if (type === 'info') proc.id = ++this.nextProcess;
      return { type, code };
    }
  }

  private async clientThread(index: number, until: number, rand: SeededRand): Promise<void> {
    const proc = { id: ++this.nextProcess };
    const owned: OwnedJob[] = [];
    const target = this.o.jobsPerProcess ?? 5;
    const timeout = this.o.callTimeoutMs ?? 4000;
    while (!this.stopping && this.o.now() < until) {
      await sleep(100 + rand.int(400));
      if (this.stopping || this.o.now() >= until) break;
      if (owned.length < target || rand.chance(0.01)) {
        await this.create(proc, owned, index, rand, timeout);
        continue;
      }
      const job = owned[rand.int(owned.length)]!;
      // Weights keep most jobs alive and unpaused most of the time, so slots are owed and
      // checked; a paused job is resumed soon.
      const draw = rand.int(100);
      if (job.version === undefined || job.paused === undefined || draw < 25) {
        await this.get(proc, job, rand, timeout, owned);
      } else if (job.paused && draw < 55) {
        await this.pauseResume(proc, job, 'resume', rand, timeout);
      } else if (draw < 45) {
        await this.listRuns(proc, job.jobId, rand, timeout);
      } else if (draw < 70) {
        await this.update(proc, job, rand, timeout);
      } else if (draw < 78) {
        await this.pauseResume(proc, job, job.paused ? 'resume' : 'pause', rand, timeout);
      } else if (draw < 81) {
        await this.remove(proc, job, owned, rand, timeout);
      } else {
        await this.listRuns(proc, job.jobId, rand, timeout);
      }
    }
  }

  private async create(
    proc: { id: number },
    owned: OwnedJob[],
    index: number,
    rand: SeededRand,
    timeout: number,
  ): Promise<void> {
    const n = ++this.nextJob;
    const jobId = `c${index}-j${n}`;
    const tenant = this.o.tenants[rand.int(this.o.tenants.length)]!;
    const definition = this.newDefinition(rand, tenant, `${jobId}-w0`);
    const requestId = `req-${jobId}`;
    this.tenantOfJob.set(jobId, tenant);
    const res = await this.op(
      proc,
      'create',
      jobId,
      async () => {
        const r = await this.client(rand).call<Obj>(
          'JobService',
          'CreateJob',
          { jobId, requestId, spec: specOf(definition, jobId, this.o) },
          timeout,
        );
        return jobReadOf(r['job'] as Obj);
      },
      { requestId, definition },
    );
    if (res.type === 'fail') return;
    this.counts.jobs++;
    const read = res.type === 'ok' ? (res.value as JobRead) : undefined;
    owned.push({
      jobId,
      requestId,
      definition,
      version: read?.version,
      paused: read?.paused,
      writes: 0,
    });
    this.live.add(jobId);
  }

  private async get(
    proc: { id: number },
    job: OwnedJob,
    rand: SeededRand,
    timeout: number,
    owned: OwnedJob[],
  ): Promise<void> {
    const res = await this.op(proc, 'get', job.jobId, async () =>
      jobReadOf(
        await this.client(rand).call<Obj>('JobService', 'GetJob', this.named(job.jobId), timeout),
      ),
    );
    if (res.type !== 'ok') return;
    const read = res.value as JobRead | null;
    if (read === null) {
      // An unknown create that did not happen (yet): the job is given up; it keeps its final read.
      owned.splice(owned.indexOf(job), 1);
      this.live.delete(job.jobId);
      return;
    }
    job.version = read.version;
    job.paused = read.paused;
    job.definition = read.definition;
  }

  private async update(
    proc: { id: number },
    job: OwnedJob,
    rand: SeededRand,
    timeout: number,
  ): Promise<void> {
    const fresh = this.newDefinition(rand, job.definition.tenant, `${job.jobId}-w${++job.writes}`);
    // Half the updates only rename (same schedule), half change the schedule and policies too.
    const definition: JobDefinition = rand.chance(0.5)
      ? compact<JobDefinition>({
          tenant: job.definition.tenant,
          name: fresh.name,
          schedule: job.definition.schedule,
          ...(job.definition.anchorMs === undefined ? {} : { anchorMs: job.definition.anchorMs }),
          delivery: job.definition.delivery ?? 'at_least_once',
          misfire: job.definition.misfire ?? { policy: 'fire_once' },
        })
      : fresh;
    const expectedVersion = job.version;
    const res = await this.op(
      proc,
      'update',
      job.jobId,
      async () =>
        jobReadOf(
          await this.client(rand).call<Obj>(
            'JobService',
            'UpdateJob',
            {
              ...this.named(job.jobId),
              expectedVersion,
              spec: specOf(definition, job.jobId, this.o),
            },
            timeout,
          ),
        ),
      { definition, ...(expectedVersion === undefined ? {} : { expectedVersion }) },
    );
    if (res.type === 'ok') {
      const read = res.value as JobRead;
      job.version = read.version;
      job.definition = read.definition;
    } else if (res.type === 'info' || res.code === 'JOB_VERSION_CONFLICT') {
      job.version = undefined;
    }
  }

  private async pauseResume(
    proc: { id: number },
    job: OwnedJob,
    f: 'pause' | 'resume',
    rand: SeededRand,
    timeout: number,
  ): Promise<void> {
    const method = f === 'pause' ? 'PauseJob' : 'ResumeJob';
    const res = await this.op(proc, f, job.jobId, async () =>
      jobReadOf(
        await this.client(rand).call<Obj>('JobService', method, this.named(job.jobId), timeout),
      ),
    );
    if (res.type === 'ok') job.paused = (res.value as JobRead).paused;
    else job.paused = undefined;
  }

  private async remove(
    proc: { id: number },
    job: OwnedJob,
    owned: OwnedJob[],
    rand: SeededRand,
    timeout: number,
  ): Promise<void> {
    const res = await this.op(proc, 'delete', job.jobId, async () => {
      await this.client(rand).call('JobService', 'DeleteJob', this.named(job.jobId), timeout);
      return undefined;
    });
    // Whatever the outcome, the job is not written again (an unknown delete may still happen).
    owned.splice(owned.indexOf(job), 1);
    // A delete that surely failed leaves the job firing: the sweeper keeps reading its runs, or
    // its slots would leave the bounded history unobserved (seed 702: 4 slots).
    if (res.type !== 'fail') this.live.delete(job.jobId);
  }

  /** Every run of the job, newest first, paging to the end. */
  private async allRuns(client: ApiClient, jobId: string, timeout: number): Promise<RunsRead> {
    const runs: RunRead[] = [];
    let pageToken = '';
    for (let page = 0; page < 20; page++) {
      const res = await client.call<Obj>(
        'RunService',
        'ListRuns',
        { ...this.named(jobId), pageSize: 1000, pageToken },
        timeout,
      );
      for (const r of res['runs'] as Obj[]) runs.push(runReadOf(r));
      pageToken = typeof res['nextPageToken'] === 'string' ? res['nextPageToken'] : '';
      if (pageToken === '') return { runs, complete: true };
    }
    return { runs, complete: false };
  }

  private async listRuns(
    proc: { id: number },
    jobId: string,
    rand: SeededRand,
    timeout: number,
  ): Promise<void> {
    await this.op(proc, 'list-runs', jobId, () => this.allRuns(this.client(rand), jobId, timeout));
  }

  /** Reads every live job's runs in turn, so slots are observed before they leave retention. */
  private async sweeper(until: number, rand: SeededRand): Promise<void> {
    const proc = { id: ++this.nextProcess };
    const timeout = this.o.callTimeoutMs ?? 4000;
    while (!this.stopping && this.o.now() < until) {
      const ids = [...this.live];
      if (ids.length === 0) await sleep(500);
      for (const jobId of ids) {
        if (this.stopping || this.o.now() >= until) break;
        await this.listRuns(proc, jobId, rand, timeout);
        await sleep(50);
      }
    }
  }

  /**
   * After the final heal and the recovery wait: a read of every job touched, retried (through
   * every node in turn) until it answers. Returns how many jobs could not be read.
   */
  async finalReads(deadlineMs: number): Promise<number> {
    let unread = 0;
    for (const jobId of [...this.touched].sort()) {
      let done = false;
      for (let i = 0; !done && this.o.now() < deadlineMs; i++) {
        const client = this.o.clients[i % this.o.clients.length]!;
        const t = this.o.now();
        try {
          let job: JobRead | null;
          try {
            job = jobReadOf(
              await client.call<Obj>('JobService', 'GetJob', this.named(jobId), 5000),
            );
          } catch (err) {
            if (!(err instanceof ApiCallError) || err.code !== 'JOB_NOT_FOUND') throw err;
            job = null;
          }
          const runs = await this.allRuns(client, jobId, 10_000).catch((err: unknown) => {
            // A deleted job's runs may be gone with it: an empty, complete answer.
            if (job === null && err instanceof ApiCallError && err.code === 'JOB_NOT_FOUND')
              return { runs: [], complete: true };
            throw err;
          });
          const record: FinalReadRecord = {
            type: 'final',
            t,
            tDone: this.o.now(),
            jobId,
            job,
            runs,
          };
          this.o.history.append(record);
          done = true;
        } catch {
          await sleep(300);
        }
      }
      if (!done) unread++;
    }
    return unread;
  }
}
