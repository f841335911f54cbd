/**
 * Pull-based workers (docs/API.md, Workers): a worker opens a stream to a node, offers a pool name,
 * tags and a capacity, and the node leases it runs of the groups it leads whose target is
 * `worker:<pool>` (worker-target.ts). A lease carries the fire id, the attempt and the fencing
 * token; it lasts the job's attempt deadline, at most LEASE_MAX_MS, and each renewal extends it
 * by as much again. A completion carries the token and is refused when it is stale: the lease
 * expired, its stream ended, or the leadership that granted it is over. A lease not renewed in
 * time returns the run for another attempt (a retry like a webhook's time-out).
 *
 * A worker may stream its output while it runs (`output` messages, docs/API.md "Run output"):
 * it goes to this node's RunOutputStore, beside the log, as does a completion's output when
 * nothing was streamed; the attempt record keeps the completion's first 1,024 characters.
 *
 * Each attempt leased here is one attempt of the delivery runner: the runner's fair queue has
 * already ordered it (P0 first, tenants in turn) and holds its per-tenant and per-pool capacity
 * until the lease ends, so workers are one more kind of target, not a second scheduler.
 */
import { assert } from '../base/assert.js';
import { SystemClock, type Clock } from '../base/clock.js';
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import { RETRY_AFTER_MAX_MS } from './classify.js';
import { notStartedReport, type StartVerdict } from './delivery-runner.js';
import type { DeliveryErrorCode } from './errors.js';
import {
  outputExcerpt,
  RUN_OUTPUT_EXCERPT_CHARS,
  type RunOutputStore,
} from './run-output-store.js';
import type { AttemptReport } from './webhook.js';
import {
  offersAll,
  WORKER_NAME,
  WORKER_NAME_RULE,
  WORKER_TAGS_MAX,
  type WorkerTarget,
} from './worker-target.js';

/** The longest a lease lasts without a renewal (at most 30 s: docs/API.md, Workers). */
export const LEASE_MAX_MS = 30_000;
export const WORKER_CAPACITY_MAX = 1024;
export const WORKER_ID_CHARS_MAX = 128;
/** Longest excerpt of a worker's output or error kept in the attempt record. */
export const WORKER_TEXT_CHARS_MAX = RUN_OUTPUT_EXCERPT_CHARS;
/** How soon a lease told to wait (the lease of the Raft leadership not provable) asks again. */
const WAIT_RETRY_MS = 5;

/** What a worker says when it connects. */
export interface WorkerHello {
  /** The only tenant whose runs this worker may lease; undefined: every tenant's. */
  readonly tenant?: string | undefined;
  readonly workerId: string;
  readonly pool: string;
  readonly tags: readonly string[];
  /** Most leases it holds at once on this stream. */
  readonly capacity: number;
}

/** Which attempt of which run: what a lease names, and a lease request asks for. */
export interface LeasedAttempt {
  readonly jobId: string;
  readonly tenant: string;
  readonly fireId: string;
  readonly slotMs: number;
  readonly attempt: number;
  readonly token: number;
  /** The job's JSON payload text. */
  readonly payload: string;
}

/** A run leased to a worker. */
export interface RunLease extends LeasedAttempt {
  /** How long the lease lasts from now, and from each renewal. */
  readonly leaseMs: number;
  /** Wall-clock ms when it ends unless renewed. */
  readonly leaseDeadlineMs: number;
  /** Bytes of streamed output this node keeps for the attempt; 0: it keeps none (do not send). */
  readonly outputMaxBytes: number;
}

/** How a worker says a run ended. */
export interface WorkerCompletion {
  readonly success: boolean;
  /** A failure that should be retried by the job's retry policy (else the run is DEAD). */
  readonly retryable: boolean;
  readonly error: string;
  /** A retryable failure's wish for the next attempt's delay. */
  readonly retryAfterMs: number | undefined;
  /**
   * A result text: its first 1,024 characters are the attempt's response excerpt, and, when the
   * worker streamed nothing, it is the attempt's output kept on this node (up to its bound).
   */
  readonly output: string;
}

export type LeaseAnswer =
  | { readonly ok: true; readonly leaseDeadlineMs: number }
  | { readonly ok: false; readonly reason: string };

/** How the hub talks to one worker's stream (the gRPC service, or a test). */
export interface WorkerStreamIo {
  lease(lease: RunLease): void;
  /** The lease ended on the node's side (expired, leadership over): stop working on it. */
  revoke(fireId: string, token: number, reason: string): void;
  /** The hub closed: end the stream. */
  end(reason: string): void;
}

/** One attempt the delivery runner asks a worker to perform. */
export interface WorkerLeaseRequest extends LeasedAttempt {
  readonly target: WorkerTarget;
  readonly attemptDeadlineMs: number;
  /**
   * Asked when a worker is found, just before the lease is sent, and at each renewal and
   * completion: `drop` (the granting leadership is over) makes a completion stale; `drop` and
   * `cancel` (paused, deleted or moved on while it waited for a worker) before the send mean
   * it is never leased.
   */
  readonly mayStart: () => StartVerdict;
}

export interface WorkerHubStats {
  connected: number;
  leased: number;
  completed: number;
  expired: number;
  disconnected: number;
  unavailable: number;
  staleAnswers: number;
}

interface Waiting {
  readonly req: WorkerLeaseRequest;
  readonly resolve: (r: AttemptReport) => void;
  readonly sinceMs: number;
  timer: NodeJS.Timeout | undefined;
}

interface Held {
  readonly req: WorkerLeaseRequest;
  readonly resolve: (r: AttemptReport) => void;
  readonly session: WorkerSession;
  readonly startedMs: number;
  readonly leaseMs: number;
  timer: NodeJS.Timeout;
  /** The worker streamed output for it: the store holds that, and the completion's is not kept. */
  outputOpened: boolean;
}

export class WorkerHub {
  private readonly clock: Clock;
  private readonly leaseMaxMs: number;
  private readonly sessions = new Map<string, Set<WorkerSession>>();
  private readonly waiting = new Map<string, Waiting[]>();
  /** Leases out now, by fire id (a fire id has one attempt in flight at a time). */
  private readonly held = new Map<string, Held>();
  private closed = false;
  /** Pools whose waiting attempts will be offered again shortly (mayStart said `wait`). */
  private readonly waitTimers = new Map<string, NodeJS.Timeout>();
  /** Where workers' outputs are kept; none: nothing is kept and leases say so. */
  private readonly outputs: RunOutputStore | undefined;
  readonly stats: WorkerHubStats = {
    connected: 0,
    leased: 0,
    completed: 0,
    expired: 0,
    disconnected: 0,
    unavailable: 0,
    staleAnswers: 0,
  };

  constructor(options: { clock?: Clock; leaseMaxMs?: number; outputs?: RunOutputStore } = {}) {
    this.clock = options.clock ?? SystemClock;
    this.leaseMaxMs = options.leaseMaxMs ?? LEASE_MAX_MS;
    this.outputs = options.outputs?.enabled === true ? options.outputs : undefined;
  }

  /** Workers connected now, by pool. */
  workerCounts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [pool, set] of this.sessions) if (set.size > 0) out.set(pool, set.size);
    return out;
  }

  get heldCount(): number {
    return this.held.size;
  }

  get waitingCount(): number {
    let n = 0;
    for (const list of this.waiting.values()) n += list.length;
    return n;
  }

  /** A worker's stream opened with `hello`; throws a ValidationError naming the bad fields. */
  connect(hello: WorkerHello, io: WorkerStreamIo): WorkerSession {
    const violations = helloViolations(hello);
    if (violations.length > 0) throw new ValidationError('WORKER_HELLO_INVALID', violations);
    if (this.closed) throw new TickraftError('WORKER_HUB_CLOSED', 'this node is shutting down');
    const session = new WorkerSession(this, hello, io);
    let set = this.sessions.get(hello.pool);
    if (set === undefined) {
      set = new Set();
      this.sessions.set(hello.pool, set);
    }
    set.add(session);
    this.stats.connected++;
    this.handOut(hello.pool);
    return session;
  }

  /**
   * Leases one attempt to a worker of its pool: at once if one has room, else when one does,
   * waiting at most the lease bound. Resolves once, with the attempt's outcome.
   */
  lease(req: WorkerLeaseRequest): Promise<AttemptReport> {
    return new Promise((resolve) => {
      if (this.closed) {
        resolve(notLeased('WORKER_HUB_CLOSED', 'this node accepts no worker leases now', 0));
        return;
      }
      const w: Waiting = { req, resolve, sinceMs: this.clock.monotonicMs(), timer: undefined };
      let list = this.waiting.get(req.target.pool);
      if (list === undefined) {
        list = [];
        this.waiting.set(req.target.pool, list);
      }
      list.push(w);
      w.timer = setTimeout(() => this.giveUpWaiting(w), this.leaseMsOf(req));
      w.timer.unref();
      this.handOut(req.target.pool);
    });
  }

  private leaseMsOf(req: WorkerLeaseRequest): number {
    return Math.max(1, Math.min(req.attemptDeadlineMs, this.leaseMaxMs));
  }

  private giveUpWaiting(w: Waiting): void {
    if (!this.removeWaiting(w)) return;
    const verdict = w.req.mayStart();
    if (verdict === 'drop' || verdict === 'cancel') {
      // Paused, deleted or deposed while it waited: no attempt, as for a queued webhook.
      w.resolve(notStarted(verdict));
      return;
    }
    this.stats.unavailable++;
    const waitedMs = Math.round(this.clock.monotonicMs() - w.sinceMs);
    const tags = w.req.target.tags.length > 0 ? ` with tags ${w.req.target.tags.join(',')}` : '';
    w.resolve(
      notLeased(
        'WORKER_UNAVAILABLE',
        `no worker of pool ${w.req.target.pool}${tags} connected to this node took the run within ${waitedMs} ms`,
        waitedMs,
      ),
    );
  }

  private removeWaiting(w: Waiting): boolean {
    const list = this.waiting.get(w.req.target.pool);
    const at = list?.indexOf(w) ?? -1;
    if (list === undefined || at < 0) return false;
    list.splice(at, 1);
    if (w.timer) clearTimeout(w.timer);
    w.timer = undefined;
    return true;
  }

  /** Leases what waits for `pool` to its workers with room, oldest first. */
  private handOut(pool: string): void {
    // Closing ends streams, whose freed slots must not go to waiting attempts (close reports
    // those as never leased).
    if (this.closed) return;
    const list = this.waiting.get(pool);
    const set = this.sessions.get(pool);
    if (list === undefined || list.length === 0 || set === undefined || set.size === 0) return;
    let retryLater = false;
    for (let i = 0; i < list.length;) {
      const w = list[i] as Waiting;
      const session = this.pick(set, w.req.target.tags, w.req.tenant);
      if (session === undefined) {
        i++;
        continue;
      }
      const verdict = w.req.mayStart();
      if (verdict === 'wait') {
        retryLater = true;
        i++;
        continue;
      }
      list.splice(i, 1);
      if (w.timer) clearTimeout(w.timer);
      if (verdict !== 'start') {
        w.resolve(notStarted(verdict));
        continue;
      }
      this.grant(w, session);
    }
    if (retryLater && !this.waitTimers.has(pool)) {
      // One timer per pool however many attempts were told to wait.
      const timer = setTimeout(() => {
        this.waitTimers.delete(pool);
        this.handOut(pool);
      }, WAIT_RETRY_MS);
      timer.unref();
      this.waitTimers.set(pool, timer);
    }
  }

  /** The worker with room that offers every tag, least loaded first. */
  private pick(
    set: ReadonlySet<WorkerSession>,
    tags: readonly string[],
    tenant: string,
  ): WorkerSession | undefined {
    let best: WorkerSession | undefined;
    let bestLoad = Infinity;
    for (const s of set) {
      if (s.draining || s.inflight >= s.hello.capacity || !offersAll(s.tagSet, tags)) continue;
      if (s.hello.tenant !== undefined && s.hello.tenant !== tenant) continue;
      const load = s.inflight / s.hello.capacity;
      if (load < bestLoad) {
        best = s;
        bestLoad = load;
      }
    }
    return best;
  }

  private grant(w: Waiting, session: WorkerSession): void {
    const req = w.req;
    const leaseMs = this.leaseMsOf(req);
    const held: Held = {
      req,
      resolve: w.resolve,
      session,
      startedMs: this.clock.monotonicMs(),
      leaseMs,
      timer: setTimeout(() => this.expire(req.fireId, req.token), leaseMs),
      outputOpened: false,
    };
    held.timer.unref();
    // A newer attempt of the same fire id supersedes an older one still out (a leadership that
    // came back to this node with a higher token). The new lease is counted first, so that the
    // hand-out the older one's end triggers sees this worker's true load.
    const older = this.held.get(req.fireId);
    this.held.set(req.fireId, held);
    session.inflight++;
    this.stats.leased++;
    if (older !== undefined) {
      const why = 'superseded by a newer attempt';
      this.end(older, expired(older, this.clock, why), why);
    }
    session.io.lease({
      jobId: req.jobId,
      tenant: req.tenant,
      fireId: req.fireId,
      slotMs: req.slotMs,
      attempt: req.attempt,
      token: req.token,
      payload: req.payload,
      leaseMs,
      leaseDeadlineMs: this.clock.nowMs() + leaseMs,
      outputMaxBytes: this.outputs?.maxBytes ?? 0,
    });
  }

  private expire(fireId: string, token: number): void {
    const held = this.held.get(fireId);
    if (held === undefined || held.req.token !== token) return;
    this.stats.expired++;
    this.end(
      held,
      expired(held, this.clock, `lease of ${held.leaseMs} ms not renewed`),
      'lease expired',
    );
  }

  /**
   * Releases the waiting attempts whose owner may no longer lease them (its leadership ended, or
   * its job was paused or deleted): the runner calls it when a leadership ends, so that they do
   * not hold their tenant's and pool's caps until their wait runs out.
   */
  releaseWaiting(): number {
    let released = 0;
    for (const list of this.waiting.values()) {
      for (const w of [...list]) {
        const verdict = w.req.mayStart();
        if (verdict !== 'drop' && verdict !== 'cancel') continue;
        this.removeWaiting(w);
        w.resolve(notStarted(verdict));
        released++;
      }
    }
    return released;
  }

  /** Ends a lease: the runner hears `report`, the worker hears why (unless it ended it). */
  private end(held: Held, report: AttemptReport, revokeReason: string | undefined): void {
    clearTimeout(held.timer);
    if (this.held.get(held.req.fireId) === held) this.held.delete(held.req.fireId);
    // However it ended, nothing more is added to what it streamed.
    if (held.outputOpened) this.outputs?.finish(held.req.fireId, held.req.attempt);
    held.session.inflight--;
    if (revokeReason !== undefined && held.session.isOpen) {
      held.session.io.revoke(held.req.fireId, held.req.token, revokeReason);
    }
    held.resolve({ ...report, worker: held.session.hello.workerId });
    this.handOut(held.session.hello.pool);
  }

  /** The held lease a worker's answer names, or why the answer is stale. */
  private heldFor(session: WorkerSession, fireId: string, token: number): Held | string {
    const held = this.held.get(fireId);
    if (held === undefined || held.session !== session) {
      return 'no such lease on this stream (it expired, was revoked or was never granted here)';
    }
    if (held.req.token !== token) {
      return `stale fencing token ${token}: the lease holds token ${held.req.token}`;
    }
    if (held.req.mayStart() === 'drop') {
      // The leadership that granted it is over: another leader leases the run again with a
      // higher token, and this attempt's result could not be recorded anyway.
      this.end(
        held,
        expired(held, this.clock, 'the leadership that granted the lease ended'),
        undefined,
      );
      return 'the leadership that granted the lease ended; the run is leased again with a higher token';
    }
    return held;
  }

  renew(session: WorkerSession, fireId: string, token: number): LeaseAnswer {
    const held = this.heldFor(session, fireId, token);
    if (typeof held === 'string') {
      this.stats.staleAnswers++;
      return { ok: false, reason: held };
    }
    clearTimeout(held.timer);
    held.timer = setTimeout(() => this.expire(fireId, token), held.leaseMs);
    held.timer.unref();
    return { ok: true, leaseDeadlineMs: this.clock.nowMs() + held.leaseMs };
  }

  /**
   * A part of the output of a run the worker holds (its stdout and stderr as they come): kept
   * on this node, beside the log, up to the bound. Refused as a renewal is (a stale token, a
   * lease not held); accepted and dropped when this node keeps no output.
   */
  output(session: WorkerSession, fireId: string, token: number, text: string): LeaseAnswer {
    const held = this.heldFor(session, fireId, token);
    if (typeof held === 'string') {
      this.stats.staleAnswers++;
      return { ok: false, reason: held };
    }
    const outputs = this.outputs;
    if (outputs !== undefined) {
      if (!held.outputOpened) {
        held.outputOpened = true;
        outputs.open(fireId, held.req.attempt);
      }
      outputs.append(fireId, held.req.attempt, text);
    }
    return { ok: true, leaseDeadlineMs: this.clock.nowMs() };
  }

  complete(
    session: WorkerSession,
    fireId: string,
    token: number,
    c: WorkerCompletion,
  ): LeaseAnswer {
    const held = this.heldFor(session, fireId, token);
    if (typeof held === 'string') {
      this.stats.staleAnswers++;
      return { ok: false, reason: held };
    }
    this.stats.completed++;
    const durationMs = Math.round(this.clock.monotonicMs() - held.startedMs);
    // A worker that streamed its output has it kept already; else the completion's is the output.
    if (!held.outputOpened) this.outputs?.put(fireId, held.req.attempt, c.output);
    const output = outputExcerpt(c.output);
    const report: AttemptReport = c.success
      ? { outcome: 'success', durationMs, responseExcerpt: output, isProvablyUndelivered: false }
      : {
          outcome: c.retryable ? 'retry' : 'fail',
          code: 'WORKER_FAILED',
          durationMs,
          error: `worker ${session.hello.workerId}: ${outputExcerpt(c.error) || 'failed'}`,
          responseExcerpt: output,
          ...(c.retryable && c.retryAfterMs !== undefined && c.retryAfterMs > 0
            ? { retryAfterMs: Math.min(c.retryAfterMs, RETRY_AFTER_MAX_MS) }
            : {}),
          isProvablyUndelivered: false,
        };
    this.end(held, report, undefined);
    return { ok: true, leaseDeadlineMs: this.clock.nowMs() };
  }

  /** A worker's stream ended: its leases return their runs for another attempt. */
  disconnect(session: WorkerSession): void {
    const set = this.sessions.get(session.hello.pool);
    if (set?.delete(session) !== true) return;
    if (set.size === 0) this.sessions.delete(session.hello.pool);
    for (const held of [...this.held.values()]) {
      if (held.session !== session) continue;
      this.stats.disconnected++;
      this.end(
        held,
        {
          outcome: 'retry',
          code: 'WORKER_DISCONNECTED',
          durationMs: Math.round(this.clock.monotonicMs() - held.startedMs),
          error: `worker ${session.hello.workerId} disconnected while holding the lease`,
          responseExcerpt: '',
          isProvablyUndelivered: false,
        },
        undefined,
      );
    }
  }

  /** Ends every stream; waiting attempts are reported as never leased. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.waitTimers.values()) clearTimeout(timer);
    this.waitTimers.clear();
    for (const set of [...this.sessions.values()]) {
      for (const s of [...set]) s.close('the node is shutting down');
    }
    for (const list of this.waiting.values()) {
      for (const w of list.splice(0)) {
        if (w.timer) clearTimeout(w.timer);
        w.resolve(
          notLeased('WORKER_HUB_CLOSED', 'the node shut down before a worker took the run', 0),
        );
      }
    }
  }
}

/** One worker's stream. */
export class WorkerSession {
  inflight = 0;
  /** The worker is stopping: no new leases, the ones it holds run to completion. */
  draining = false;
  readonly tagSet: ReadonlySet<string>;
  private open = true;

  constructor(
    private readonly hub: WorkerHub,
    readonly hello: WorkerHello,
    readonly io: WorkerStreamIo,
  ) {
    this.tagSet = new Set(hello.tags);
  }

  get isOpen(): boolean {
    return this.open;
  }

  renew(fireId: string, token: number): LeaseAnswer {
    if (!this.open) return { ok: false, reason: 'the stream is closed' };
    return this.hub.renew(this, fireId, token);
  }

  complete(fireId: string, token: number, completion: WorkerCompletion): LeaseAnswer {
    if (!this.open) return { ok: false, reason: 'the stream is closed' };
    return this.hub.complete(this, fireId, token, completion);
  }

  output(fireId: string, token: number, text: string): LeaseAnswer {
    if (!this.open) return { ok: false, reason: 'the stream is closed' };
    return this.hub.output(this, fireId, token, text);
  }

  /** The stream ended (the worker went away, or the hub closes it). */
  close(reason?: string): void {
    if (!this.open) return;
    this.open = false;
    this.hub.disconnect(this);
    if (reason !== undefined) this.io.end(reason);
  }
}

function helloViolations(h: WorkerHello): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (h.workerId === '' || h.workerId.length > WORKER_ID_CHARS_MAX) {
    out.push({ field: 'hello.worker_id', reason: `must be 1-${WORKER_ID_CHARS_MAX} characters` });
  }
  if (!WORKER_NAME.test(h.pool)) {
    out.push({
      field: 'hello.pool',
      reason: WORKER_NAME_RULE,
    });
  }
  if (h.tags.length > WORKER_TAGS_MAX)
    out.push({ field: 'hello.tags', reason: `at most ${WORKER_TAGS_MAX}` });
  h.tags.forEach((t, i) => {
    if (!WORKER_NAME.test(t)) {
      out.push({
        field: `hello.tags[${i}]`,
        reason: WORKER_NAME_RULE,
      });
    }
  });
  if (!Number.isInteger(h.capacity) || h.capacity < 1 || h.capacity > WORKER_CAPACITY_MAX) {
    out.push({
      field: 'hello.capacity',
      reason: `must be an integer in [1, ${WORKER_CAPACITY_MAX}]`,
    });
  }
  return out;
}

function notStarted(verdict: 'drop' | 'cancel'): AttemptReport {
  return notStartedReport(verdict, 'the lease');
}

function notLeased(code: DeliveryErrorCode, error: string, durationMs: number): AttemptReport {
  return {
    outcome: 'retry',
    code,
    durationMs,
    error,
    responseExcerpt: '',
    isProvablyUndelivered: true,
  };
}

function expired(held: Held, clock: Clock, why: string): AttemptReport {
  assert(held.leaseMs > 0, 'a lease lasts a positive time');
  return {
    outcome: 'retry',
    code: 'WORKER_LEASE_EXPIRED',
    durationMs: Math.round(clock.monotonicMs() - held.startedMs),
    error: `worker ${held.session.hello.workerId}: ${why}`,
    responseExcerpt: '',
    isProvablyUndelivered: false,
  };
}
