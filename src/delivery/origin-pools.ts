/**
 * One undici Pool per origin (scheme, host, port), each with a bounded number of keep-alive
 * connections and pipelining 1. Pools rather than one Agent: a request through an Agent cost
 * about half as much CPU again on this machine, and the bound per origin is what keeps one slow
 * receiver from taking every socket. Pipelining stays at 1: against a
 * slow endpoint deeper pipelines only add head-of-line blocking, and classify.ts relies on a
 * request being written only after its socket connected (see isProvablyUndelivered).
 *
 * The registry is bounded too: pools not used for `idleCloseMs` are closed by a sweep, and when
 * `originsMax` pools exist the least recently used idle one makes room; if none is idle the
 * request is refused (DELIVERY_ORIGINS_EXHAUSTED, a retry) rather than the map growing.
 *
 * Every pool connects through guardedConnector (guarded-connect.ts): a connection to an address
 * the target policy forbids (loopback, private, link-local…, also when a name resolves to one)
 * is never opened, and its requests fail with TARGET_FORBIDDEN.
 */
import { Pool } from 'undici';
import type { Dispatcher, buildConnector } from 'undici';
import { assertionFailed } from '../base/assert.js';
import { SystemClock, type Clock } from '../base/clock.js';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { DeliveryError, INVALID_OPTIONS } from './errors.js';
import { guardedConnector, type ResolveAll } from './guarded-connect.js';
import { TargetPolicy } from './target-policy.js';

export interface OriginPoolsOptions {
  /** Most sockets open to one origin; requests beyond it wait inside the pool. @default 16 */
  readonly connectionsPerOrigin?: number;
  /** A pool with nothing in flight for this long is closed. @default 60000 */
  readonly idleCloseMs?: number;
  /** Most pools at once (distinct origins). @default 10000 */
  readonly originsMax?: number;
  /** TCP (and TLS) connect timeout. @default 10000 */
  readonly connectTimeoutMs?: number;
  /** An idle keep-alive socket is closed after this (a server's keep-alive hint may lower it). @default 4000 */
  readonly keepAliveTimeoutMs?: number;
  /** How often idle pools are looked for; 0 = never (call sweepIdle() yourself). @default idleCloseMs / 2 */
  readonly sweepIntervalMs?: number;
  /** Monotonic time for idleness. @default SystemClock */
  readonly clock?: Clock;
  /**
   * Which addresses connections may go to (`--allow-target` widens it).
   * @default TargetPolicy.STRICT: no loopback, private, link-local… address
   */
  readonly targetPolicy?: TargetPolicy;
  /** Resolves target names before the policy checks them (a test seam). @default dns.lookup */
  readonly resolve?: ResolveAll;
}

export interface CompiledOriginPoolsOptions {
  readonly connectionsPerOrigin: number;
  readonly idleCloseMs: number;
  readonly originsMax: number;
  readonly connectTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly sweepIntervalMs: number;
  readonly clock: Clock;
  readonly targetPolicy: TargetPolicy;
  readonly resolve: ResolveAll | undefined;
}

const DEFAULTS = {
  connectionsPerOrigin: 16,
  idleCloseMs: 60_000,
  originsMax: 10_000,
  connectTimeoutMs: 10_000,
  keepAliveTimeoutMs: 4_000,
} as const;

/** Defaults applied, every rule checked at once, result frozen (as every options object here). */
export function compileOriginPoolsOptions(
  options: OriginPoolsOptions = {},
): CompiledOriginPoolsOptions {
  const violations: FieldViolation[] = [];
  const intIn = (
    field: keyof typeof DEFAULTS | 'sweepIntervalMs',
    value: number,
    lo: number,
    hi: number,
  ): number => {
    if (!(Number.isSafeInteger(value) && value >= lo && value <= hi)) {
      violations.push({ field, reason: `must be an integer in [${lo}, ${hi}], got ${value}` });
    }
    return value;
  };
  const compiled = {
    connectionsPerOrigin: intIn(
      'connectionsPerOrigin',
      options.connectionsPerOrigin ?? DEFAULTS.connectionsPerOrigin,
      1,
      4096,
    ),
    idleCloseMs: intIn('idleCloseMs', options.idleCloseMs ?? DEFAULTS.idleCloseMs, 1, 86_400_000),
    originsMax: intIn('originsMax', options.originsMax ?? DEFAULTS.originsMax, 1, 1_000_000),
    connectTimeoutMs: intIn(
      'connectTimeoutMs',
      options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      1,
      300_000,
    ),
    keepAliveTimeoutMs: intIn(
      'keepAliveTimeoutMs',
      options.keepAliveTimeoutMs ?? DEFAULTS.keepAliveTimeoutMs,
      1,
      600_000,
    ),
    sweepIntervalMs: 0,
    clock: options.clock ?? SystemClock,
    targetPolicy: options.targetPolicy ?? TargetPolicy.STRICT,
    resolve: options.resolve,
  };
  compiled.sweepIntervalMs = intIn(
    'sweepIntervalMs',
    options.sweepIntervalMs ?? Math.max(1, Math.floor(compiled.idleCloseMs / 2)),
    0,
    86_400_000,
  );
  if (violations.length > 0) throw new ValidationError(INVALID_OPTIONS, violations);
  return Object.freeze(compiled);
}

/** A pool lent for one request; release() exactly once when the request and its body ended. */
export interface OriginLease {
  readonly pool: Dispatcher;
  release(): void;
}

export interface OriginPoolsStats {
  readonly originCount: number;
  readonly inflightCount: number;
  /** Pools closed by the idle sweep or to make room, since start. */
  readonly retiredCount: number;
  /** Pools whose close() failed (their sockets are gone either way). */
  readonly closeFailureCount: number;
}

interface Entry {
  readonly origin: string;
  readonly pool: Pool;
  inflightCount: number;
  lastUsedMs: number;
}

/** One request's hold on a pool: a class, not a closure, since every attempt takes one. */
class PoolLease implements OriginLease {
  private isReleased = false;

  constructor(
    private readonly entry: Entry,
    private readonly pools: OriginPools,
  ) {}

  get pool(): Dispatcher {
    return this.entry.pool;
  }

  release(): void {
    if (!!this.isReleased) assertionFailed(`origin lease for ${this.entry.origin} released twice`);
    this.isReleased = true;
    this.pools.released(this.entry);
  }
}

export class OriginPools {
  readonly options: CompiledOriginPoolsOptions;
  /** Invariant: iteration order is least recently acquired first (re-inserted on acquire). */
  private readonly entries = new Map<string, Entry>();
  /** The last entry of `entries` (the most recently acquired), if known. */
  private newest: Entry | undefined;
  private readonly closing = new Set<Promise<void>>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private isClosed = false;
  private retiredCount = 0;
  private closeFailureCount = 0;
  private waiting = 0;
  /** The connect step every pool shares (the target policy applied at connect time). */
  private readonly connect: buildConnector.connector;

  constructor(options: OriginPoolsOptions = {}) {
    this.options = compileOriginPoolsOptions(options);
    this.connect = guardedConnector({
      policy: this.options.targetPolicy,
      timeoutMs: this.options.connectTimeoutMs,
      ...(this.options.resolve ? { resolve: this.options.resolve } : {}),
    });
  }

  /**
   * The pool for `origin` (as `new URL(url).origin` spells it), created on first use. Throws a
   * DeliveryError when closed or when every one of `originsMax` pools is busy; webhook.ts turns
   * both into a retry that provably sent nothing.
   */
  acquire(origin: string): OriginLease {
    if (this.isClosed) {
      throw new DeliveryError('DELIVERY_POOLS_CLOSED', 'origin pools are closed', {
        outcome: 'retry',
      });
    }
    let entry = this.entries.get(origin);
    if (entry !== undefined) {
      // Re-inserted to keep the order; a spike to one origin acquires the newest over and over.
      if (entry !== this.newest) {
        this.entries.delete(origin);
        this.entries.set(origin, entry);
      }
    } else {
      if (this.entries.size >= this.options.originsMax && !this.retireLeastRecentIdle()) {
        throw new DeliveryError(
          'DELIVERY_ORIGINS_EXHAUSTED',
          `all ${this.options.originsMax} origin pools are busy`,
          { outcome: 'retry' },
        );
      }
      entry = { origin, pool: this.createPool(origin), inflightCount: 0, lastUsedMs: 0 };
      this.entries.set(origin, entry);
      this.startSweepTimer();
    }
    this.newest = entry;
    entry.inflightCount++;
    if (entry.inflightCount > this.options.connectionsPerOrigin) this.waiting++;
    entry.lastUsedMs = this.options.clock.monotonicMs();
    return new PoolLease(entry, this);
  }

  /** A lease of `entry` ended (PoolLease.release). */
  released(entry: Entry): void {
    if (entry.inflightCount > this.options.connectionsPerOrigin) this.waiting--;
    entry.inflightCount--;
    entry.lastUsedMs = this.options.clock.monotonicMs();
  }

  /**
   * Requests lent a pool beyond its origin's connections: they wait inside undici's pool for a
   * socket. Kept as a count (not summed over the pools) since the runtime asks at every step.
   */
  get waitingCount(): number {
    return this.waiting;
  }

  /** Closes pools with nothing in flight for idleCloseMs; returns how many. */
  sweepIdle(): number {
    const nowMs = this.options.clock.monotonicMs();
    let count = 0;
    for (const entry of [...this.entries.values()]) {
      if (entry.inflightCount === 0 && nowMs - entry.lastUsedMs >= this.options.idleCloseMs) {
        this.retire(entry);
        count++;
      }
    }
    return count;
  }

  stats(): OriginPoolsStats {
    let inflightCount = 0;
    for (const entry of this.entries.values()) inflightCount += entry.inflightCount;
    return {
      originCount: this.entries.size,
      inflightCount,
      retiredCount: this.retiredCount,
      closeFailureCount: this.closeFailureCount,
    };
  }

  /**
   * Refuses new requests and closes every pool gracefully: requests in flight finish first (at
   * the latest at their attempt deadline). Abort them through their signal, or call destroy(),
   * for a quicker stop.
   */
  async close(): Promise<void> {
    this.shutDown();
    for (const entry of [...this.entries.values()]) this.retire(entry);
    await Promise.all([...this.closing]);
  }

  /** Refuses new requests and drops every socket now; requests in flight fail. */
  async destroy(): Promise<void> {
    this.shutDown();
    const pools = [...this.entries.values()].map((e) => e.pool);
    this.entries.clear();
    this.newest = undefined;
    await Promise.all([...pools.map((p) => p.destroy()), ...this.closing]);
  }

  private shutDown(): void {
    this.isClosed = true;
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
  }

  private createPool(origin: string): Pool {
    return new Pool(origin, {
      connections: this.options.connectionsPerOrigin,
      pipelining: 1,
      // The connector carries the connect timeout (undici ignores connectTimeout beside it).
      connect: this.connect,
      keepAliveTimeout: this.options.keepAliveTimeoutMs,
    });
  }

  private startSweepTimer(): void {
    if (this.sweepTimer !== undefined || this.options.sweepIntervalMs === 0) return;
    this.sweepTimer = setInterval(() => this.sweepIdle(), this.options.sweepIntervalMs);
    // The sweep is housekeeping: it must not keep a process alive that has nothing else to do.
    this.sweepTimer.unref();
  }

  private retireLeastRecentIdle(): boolean {
    for (const entry of this.entries.values()) {
      if (entry.inflightCount === 0) {
        this.retire(entry);
        return true;
      }
    }
    return false;
  }

  private retire(entry: Entry): void {
    if (!(entry.inflightCount === 0 || this.isClosed))
      assertionFailed(`retiring busy pool ${entry.origin}`);
    this.entries.delete(entry.origin);
    if (this.newest === entry) this.newest = undefined;
    if (!this.isClosed) this.retiredCount++;
    const closed: Promise<void> = entry.pool
      .close()
      .catch(() => {
        // Counted, not thrown: close() fails only when the pool was already destroyed, and a
        // destroyed pool holds no sockets, so there is nothing left to clean up.
        this.closeFailureCount++;
      })
      .finally(() => this.closing.delete(closed));
    this.closing.add(closed);
  }
}
