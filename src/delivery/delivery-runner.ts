/**
 * Performs the attempts a leader hands out: queued fairly (fair-queue.ts: per-tenant and
 * per-origin caps, P0 first, tenants in turn by their priority weights), sent through one undici pool per origin
 * (origin-pools.ts), signed with the tenant's secrets, and reported back once each ends. A full
 * queue is back-pressure: the attempt is reported as a retry that never left, so the leader
 * plans it again later instead of the queue growing without bound.
 */
import type { Clock } from '../base/clock.js';
import { SystemClock } from '../base/clock.js';
import type { Job } from '../scheduler/model.js';
import { FairQueue, type FairItem, type FairQueueOptions } from './fair-queue.js';
import { QueueAges } from './queue-ages.js';
import type { OriginPools } from './origin-pools.js';
import { compileSigningKeys, type SigningKeys } from './signing.js';
import type { WorkerHub } from './worker-hub.js';
import { isWorkerUrl, parseWorkerUrl } from './worker-target.js';
import {
  buildWebhookRequest,
  deliverWebhook,
  originOf,
  type AttemptReport,
  type WebhookIo,
  type WebhookLimits,
  type WebhookAttempt,
  type WebhookRequest,
} from './webhook.js';

/** One attempt to perform. */
export interface DeliveryRequest {
  readonly job: Job;
  readonly fireId: string;
  readonly slotMs: number;
  readonly attempt: number;
  readonly token: number;
}

export type DeliveryCallback = (report: AttemptReport) => void;

interface Task extends FairItem {
  readonly request: DeliveryRequest;
  readonly onDone: DeliveryCallback;
  /** Who asked (a group and its leader term), so a deposed leader's queue can be dropped. */
  readonly owner: string;
}

export interface DeliveryRunnerOptions {
  readonly pools: OriginPools;
  readonly queue: FairQueueOptions;
  /** The tenant's current secrets (newest first), or undefined for an unknown tenant. */
  readonly secretsOf: (tenant: string) => readonly string[] | undefined;
  /**
   * The tenant's priority weight (its share of start slots against other tenants with queued
   * work, fair-queue.ts), read when an attempt is submitted. @default every tenant 1
   */
  readonly weightOf?: (tenant: string) => number;
  /**
   * The tenant's in-flight cap on this node (its share of its cluster-wide limit), read when an
   * attempt is submitted; the node-wide tenantInflightMax still bounds it. @default that bound
   */
  readonly inflightMaxOf?: (tenant: string) => number;
  /**
   * Asked just before a queued attempt is sent. `drop`: its owner may no longer send (the
   * leadership ended while it waited); `cancel`: its job was paused or deleted, or its run moved
   * on, while it waited; either is reported as never sent. `wait`: not now (the lease is being
   * renewed); it keeps its place and is asked again a few ms later.
   */
  readonly mayStart?: (owner: string, request: DeliveryRequest) => StartVerdict;
  readonly clock?: Clock;
  readonly limits?: WebhookLimits;
  /** Where attempts of `worker:<pool>` targets are leased; without it they fail as retries. */
  readonly workers?: WorkerHub;
  /**
   * The `traceparent` an attempt's request carries (tracing on: src/observe/tracing.ts);
   * absent, requests carry none.
   */
  readonly traceparentOf?: (fireId: string, attempt: number) => string | undefined;
}

export type StartVerdict = 'start' | 'wait' | 'drop' | 'cancel';

const STARTS_PER_TURN = 128;
/** How long an attempt told to wait waits before it asks again. */
const WAIT_RETRY_MS = 5;

export interface DeliveryRunnerStats {
  submitted: number;
  started: number;
  finished: number;
  rejectedFull: number;
  dropped: number;
  /** Requests rendered ahead of their slot (prerender). */
  prerendered: number;
  /** Attempts sent with the request rendered ahead. */
  sentPrerendered: number;
  /** Times an attempt was told to wait before its send (mayStart: the lease not provable). */
  waited: number;
}

/**
 * A request rendered ahead (prerender), and what it was rendered from: it is sent only if the
 * attempt is the one foreseen (same attempt and token), its job's target and payload are the
 * very ones rendered, the tenant's secrets did not change, and its timestamp is recent.
 */
interface Rendered {
  readonly attempt: number;
  readonly token: number;
  readonly target: Job['target'];
  readonly payload: string;
  readonly signing: SigningKeys;
  /** webhook-timestamp, in ms (whole seconds). */
  readonly timestampMs: number;
  readonly request: WebhookRequest;
}

/**
 * Longest a rendered request waits to be sent: its webhook-timestamp says when it was made, and
 * receivers check it against their clock (Standard Webhooks allows 5 minutes by default).
 */
export const RENDERED_MAX_AGE_MS = 30_000;
/** Most requests kept rendered ahead at once (about 1 KiB each). */
export const RENDERED_MAX = 32_768;

export class DeliveryRunner {
  private readonly queue: FairQueue<Task>;
  private readonly clock: Clock;
  /** The same for every attempt: built once. */
  private readonly io: WebhookIo;
  private readonly signing = new Map<string, { secrets: readonly string[]; keys: SigningKeys }>();
  readonly stats: DeliveryRunnerStats = {
    submitted: 0,
    started: 0,
    finished: 0,
    rejectedFull: 0,
    dropped: 0,
    prerendered: 0,
    sentPrerendered: 0,
    waited: 0,
  };
  /** Requests rendered ahead, by fire id, oldest first. */
  private readonly rendered = new Map<string, Rendered>();
  /** When the queued attempts were queued (monotonic ms), for the per-tenant queue age. */
  private readonly queueAges = new QueueAges<Task>();
  /** When sweepRendered last looked at the rendered requests. */
  private sweptAtMs = 0;

  constructor(private readonly options: DeliveryRunnerOptions) {
    this.queue = new FairQueue<Task>(options.queue);
    this.clock = options.clock ?? SystemClock;
    this.io = {
      // No abort signal: one listener per attempt costs more than the attempt's own timer, and
      // a shutdown ends what is in flight by destroying the pools instead.
      pools: options.pools,
      clock: this.clock,
      ...(options.limits ? { limits: options.limits } : {}),
    };
  }

  get inflightCount(): number {
    return this.queue.inflightCount;
  }

  /** The tenant's attempts queued and in flight on this node. */
  tenantCounts(tenant: string): { queuedCount: number; inflightCount: number } {
    return this.queue.tenantCounts(tenant);
  }

  get queuedCount(): number {
    return this.queue.queuedCount;
  }

  /**
   * Attempts that wait to be sent: queued here, told to wait for a fresh lease, or lent a pool
   * whose connections are all busy (they wait for a socket inside undici).
   */
  get waitingCount(): number {
    return this.queue.queuedCount + this.waiting.length + this.options.pools.waitingCount;
  }

  /**
   * Attempts that wait for this node only: queued below their tenant's and origin's caps, or
   * told to wait for a fresh lease. Those behind a cap wait for their endpoint's answers and are
   * left out: the hand-out from the groups and the result hold are paced on this figure, and a
   * dead endpoint must not slow either for anybody else.
   */
  get startableCount(): number {
    return this.queue.startableCount + this.waiting.length;
  }

  /**
   * Whether an attempt of this tenant to this origin (deliveryOriginOf) should be handed out now
   * (FairQueue.hasRoomFor): no while enough of its kind already wait behind a full cap.
   */
  hasRoomFor(tenant: string, origin: string): boolean {
    return this.queue.hasRoomFor(tenant, origin);
  }

  /** Queues one attempt; `onDone` is called exactly once, asynchronously or at once. */
  submit(owner: string, request: DeliveryRequest, onDone: DeliveryCallback): void {
    this.stats.submitted++;
    const task: Task = {
      tenant: request.job.tenant,
      origin: deliveryOriginOf(request.job.target.url),
      priority: request.job.priority,
      weight: this.options.weightOf?.(request.job.tenant) ?? 1,
      inflightMax: this.options.inflightMaxOf?.(request.job.tenant),
      request,
      onDone,
      owner,
    };
    const pushed = this.queue.push(task);
    if (pushed !== 'queued') {
      this.stats.rejectedFull++;
      onDone({
        outcome: 'retry',
        code: 'DELIVERY_QUEUE_FULL',
        durationMs: 0,
        error:
          pushed === 'full' ? 'delivery queue full' : `tenant ${task.tenant} has too many queued`,
        responseExcerpt: '',
        isProvablyUndelivered: true,
      });
      return;
    }
    this.queueAges.queued(task.tenant, task, this.clock.monotonicMs());
    this.pump();
  }

  /** Each tenant with attempts queued here, and how long its oldest queued one has waited. */
  *oldestQueuedAgeMs(): IterableIterator<readonly [tenant: string, ageMs: number]> {
    const nowMs = this.clock.monotonicMs();
    for (const [tenant, atMs] of this.queueAges.oldest()) yield [tenant, nowMs - atMs];
  }

  /**
   * Renders (builds and signs) the request of an attempt foreseen for later, so that sending it
   * at its slot costs no render: during a :00 spike every µs of CPU goes to sending. Its
   * webhook-timestamp is the later of now and the slot. Returns false when nothing was kept: the
   * tenant has no secret, the job's webhook settings are invalid (the send reports that), it is
   * rendered already, or RENDERED_MAX requests wait.
   */
  prerender(r: DeliveryRequest): boolean {
    if (isWorkerUrl(r.job.target.url)) return false;
    const nowMs = this.clock.nowMs();
    if (this.rendered.size >= RENDERED_MAX) this.forgetStaleRendered(nowMs);
    if (this.rendered.size >= RENDERED_MAX) return false;
    const had = this.rendered.get(r.fireId);
    if (had !== undefined && had.attempt === r.attempt && had.token === r.token) return false;
    const signing = this.signingKeys(r.job.tenant);
    if (!signing) return false;
    const timestampMs = Math.max(nowMs, r.slotMs);
    const built = buildWebhookRequest(
      attemptOf(r, signing, timestampMs, this.options.traceparentOf),
    );
    if (!built.ok) return false;
    // A fire id rendered again (another token) moves to the end, in due order.
    this.rendered.delete(r.fireId);
    this.rendered.set(r.fireId, {
      attempt: r.attempt,
      token: r.token,
      target: r.job.target,
      payload: r.job.payload,
      signing,
      timestampMs: Math.floor(timestampMs / 1000) * 1000,
      request: built.request,
    });
    this.stats.prerendered++;
    return true;
  }

  /** The request rendered ahead for this attempt, if it still fits; forgotten either way. */
  private takeRendered(
    r: DeliveryRequest,
    signing: SigningKeys,
    nowMs: number,
  ): WebhookRequest | undefined {
    if (this.rendered.size === 0) return undefined;
    const had = this.rendered.get(r.fireId);
    if (had === undefined) return undefined;
    this.rendered.delete(r.fireId);
    const fits =
      had.attempt === r.attempt &&
      had.token === r.token &&
      had.target === r.job.target &&
      had.payload === r.job.payload &&
      had.signing === signing &&
      nowMs >= had.timestampMs &&
      nowMs - had.timestampMs <= RENDERED_MAX_AGE_MS;
    return fits ? had.request : undefined;
  }

  /**
   * Drops the rendered requests too old to be sent (their run was cancelled or moved, or the
   * leadership ended before their slot); the runtime calls it at every step, and it looks at
   * them at most once a second.
   */
  sweepRendered(): void {
    if (this.rendered.size === 0) return;
    const nowMs = this.clock.nowMs();
    if (nowMs - this.sweptAtMs < 1000) return;
    this.sweptAtMs = nowMs;
    this.forgetStaleRendered(nowMs);
  }

  private forgetStaleRendered(nowMs: number): void {
    for (const [fireId, had] of this.rendered) {
      if (nowMs - had.timestampMs <= RENDERED_MAX_AGE_MS) return;
      this.rendered.delete(fireId);
    }
  }

  /** Requests rendered ahead and not sent yet. */
  get renderedCount(): number {
    return this.rendered.size;
  }

  /** Forgets the queued (not started) attempts of an owner: its leadership ended. */
  dropQueued(owner: string): number {
    const removed = this.queue.removeQueuedWhere((t) => t.owner === owner);
    for (const t of removed) this.queueAges.left(t.tenant, t);
    let waiting = 0;
    this.waiting = this.waiting.filter((t) => {
      if (t.owner !== owner) return true;
      this.queue.done(t);
      waiting++;
      return false;
    });
    // Attempts waiting in the worker hub for a worker: released as well (their caps with them).
    const leasesWaiting = this.options.workers?.releaseWaiting() ?? 0;
    this.stats.dropped += removed.length + waiting;
    if (waiting > 0) this.pump();
    return removed.length + waiting + leasesWaiting;
  }

  /** Attempts taken from the queue (holding their capacity) that were told to wait. */
  private waiting: Task[] = [];
  private waitTimer: NodeJS.Timeout | undefined;

  private retryWaiting(): void {
    this.waitTimer = undefined;
    const tasks = this.waiting;
    this.waiting = [];
    for (const t of tasks) this.start(t);
  }

  private pumpScheduled = false;

  /**
   * Starts what the queue allows, at most STARTS_PER_TURN per event-loop turn: starting an
   * attempt costs tens of µs, and a spike of thousands started at once would hold the loop long
   * enough to delay Raft heartbeats into elections.
   */
  private pump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      let started = 0;
      for (let task = this.queue.take(); task !== undefined; task = this.queue.take()) {
        this.queueAges.left(task.tenant, task);
        this.start(task);
        if (++started >= STARTS_PER_TURN) {
          this.pump();
          return;
        }
      }
    });
  }

  /** The attempt ended (or never started): its capacity goes back and the owner hears. */
  private finish(task: Task, report: AttemptReport): void {
    this.queue.done(task);
    this.stats.finished++;
    task.onDone(report);
    this.pump();
  }

  private start(task: Task): void {
    this.stats.started++;
    const r = task.request;
    const verdict = this.options.mayStart?.(task.owner, r) ?? 'start';
    if (verdict === 'wait') {
      this.stats.started--;
      this.stats.waited++;
      this.waiting.push(task);
      this.waitTimer ??= setTimeout(() => this.retryWaiting(), WAIT_RETRY_MS);
      return;
    }
    if (verdict === 'drop' || verdict === 'cancel') {
      this.stats.dropped++;
      this.finish(task, notStartedReport(verdict, 'the send'));
      return;
    }
    if (isWorkerUrl(r.job.target.url)) {
      this.leaseToWorker(task);
      return;
    }
    const signing = this.signingKeys(r.job.tenant);
    if (!signing) {
      this.finish(task, {
        outcome: 'fail',
        code: 'DELIVERY_TENANT_UNKNOWN',
        durationMs: 0,
        error: `tenant ${r.job.tenant} has no signing secret`,
        responseExcerpt: '',
        isProvablyUndelivered: true,
      });
      return;
    }
    const nowMs = this.clock.nowMs();
    const rendered = this.takeRendered(r, signing, nowMs);
    if (rendered !== undefined) this.stats.sentPrerendered++;
    deliverWebhook(
      attemptOf(r, signing, nowMs, this.options.traceparentOf),
      this.io,
      rendered,
    ).then(
      (report) => this.finish(task, report),
      // deliverWebhook resolves for every delivery failure; a rejection is a bug, reported as a
      // retry so the run is not lost.
      (err: unknown) => this.finish(task, internalFailure(err)),
    );
  }

  /**
   * A `worker:` target's attempt goes to the worker hub, which leases it to a connected worker
   * of the pool (asking mayStart again when one is found: the wait may be long) and resolves
   * with the outcome; the attempt keeps its place in the fair queue's caps until then.
   */
  private leaseToWorker(task: Task): void {
    const r = task.request;
    const target = parseWorkerUrl(r.job.target.url);
    if (typeof target === 'string') {
      this.finish(task, {
        outcome: 'fail',
        code: 'DELIVERY_INVALID_REQUEST',
        durationMs: 0,
        error: `target.url: ${target}`,
        responseExcerpt: '',
        isProvablyUndelivered: true,
      });
      return;
    }
    const hub = this.options.workers;
    if (hub === undefined) {
      this.finish(task, {
        outcome: 'retry',
        code: 'WORKER_HUB_CLOSED',
        durationMs: 0,
        error: 'this node leases no runs to workers',
        responseExcerpt: '',
        isProvablyUndelivered: true,
      });
      return;
    }
    const mayStart = this.options.mayStart;
    hub
      .lease({
        target,
        jobId: r.job.id,
        tenant: r.job.tenant,
        fireId: r.fireId,
        slotMs: r.slotMs,
        attempt: r.attempt,
        token: r.token,
        payload: r.job.payload,
        attemptDeadlineMs: r.job.attemptDeadlineMs,
        mayStart: () => mayStart?.(task.owner, r) ?? 'start',
      })
      .then(
        (report) => this.finish(task, report),
        (err: unknown) => this.finish(task, internalFailure(err)),
      );
  }

  private signingKeys(tenant: string): SigningKeys | undefined {
    const secrets = this.options.secretsOf(tenant);
    if (!secrets || secrets.length === 0) return undefined;
    const cached = this.signing.get(tenant);
    // Compared secret by secret: asked at every attempt, so no string is built for it.
    if (cached !== undefined && sameSecrets(cached.secrets, secrets)) return cached.keys;
    const keys = compileSigningKeys(secrets);
    this.signing.set(tenant, { secrets: [...secrets], keys });
    return keys;
  }

  /** Forgets queued attempts; the owner ends those in flight by destroying the pools. */
  close(): void {
    this.rendered.clear();
    this.queue.removeQueuedWhere(() => true);
    this.queueAges.clear();
    if (this.waitTimer) clearTimeout(this.waitTimer);
    for (const t of this.waiting) this.queue.done(t);
    this.waiting = [];
  }
}

/**
 * What an attempt to `url` counts against: the origin of a webhook URL, or `worker:<pool>` for a
 * worker pool, which is one origin whatever tags its jobs ask for (docs/API.md, "Workers"). An
 * invalid URL is its own origin (its attempt fails at once).
 */
export function deliveryOriginOf(url: string): string {
  if (isWorkerUrl(url)) {
    const worker = parseWorkerUrl(url);
    if (typeof worker !== 'string') return `worker:${worker.pool}`;
  }
  return originOf(url) ?? url;
}

/** An attempt that never started: its owner's leadership ended, or its job was paused, deleted or updated. */
export function notStartedReport(verdict: 'drop' | 'cancel', before: string): AttemptReport {
  return {
    outcome: 'retry',
    code: 'DELIVERY_NOT_STARTED',
    durationMs: 0,
    error:
      verdict === 'drop'
        ? `leadership or its lease ended before ${before}`
        : `job paused, deleted or updated before ${before}`,
    responseExcerpt: '',
    isProvablyUndelivered: true,
  };
}

/** A rejection where a report was due (a bug): a retry, so that the run is not lost. */
function internalFailure(err: unknown): AttemptReport {
  return {
    outcome: 'retry',
    durationMs: 0,
    error: `internal: ${err instanceof Error ? err.message : String(err)}`,
    responseExcerpt: '',
    isProvablyUndelivered: false,
  };
}

/** The webhook attempt of a request, signed with `signing`, made at `nowMs`. */
function attemptOf(
  r: DeliveryRequest,
  signing: SigningKeys,
  nowMs: number,
  traceparentOf: ((fireId: string, attempt: number) => string | undefined) | undefined,
): WebhookAttempt {
  return {
    job: r.job,
    fireId: r.fireId,
    slotMs: r.slotMs,
    attempt: r.attempt,
    token: r.token,
    signing,
    nowMs,
    traceparent: traceparentOf?.(r.fireId, r.attempt),
  };
}

function sameSecrets(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
