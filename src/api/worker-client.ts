/**
 * A pull-based worker for TypeScript programs (and `tickctl worker`): it keeps one
 * WorkerService.Work stream open to every node of the cluster (found from ClusterStatus, and
 * looked up again every few seconds, so joined nodes are picked up), runs `handle` for each
 * leased run, renews the lease while the handler runs, and completes it with the handler's
 * outcome. A stream that fails is opened again with a growing delay; the stream of a node that
 * left the cluster is closed.
 *
 * What it promises: a handler's run is completed at most once, with the lease's own fencing
 * token; when the node revokes the lease (not renewed in time, leadership gone) or the stream
 * ends, the handler's AbortSignal fires, and what it then returns is not reported (the run will
 * be leased again with a higher token). Capacity is per stream: connected to three nodes with
 * capacity 4, a worker runs at most 12 handlers at once.
 *
 * A handler may stream its output while it runs (its third argument): the text goes to the node
 * holding the lease in `output` messages, gathered for up to 100 ms (so a command printing line
 * by line costs a message per batch, not per line), at most the lease's `outputMaxBytes`, and
 * flushed before the completion; `tickctl runs logs --follow` shows it as it comes.
 */
import * as grpc from '@grpc/grpc-js';
import { clientCredentials, type ClientTlsOptions } from '../transport/tls.js';
import { ApiClient, bearerMetadata } from './client.js';
import { clientServices } from './client-proto.js';

/** One leased run, as the handler sees it. */
export interface LeasedRun {
  readonly jobId: string;
  readonly tenant: string;
  readonly fireId: string;
  readonly slotMs: number;
  readonly slot: string;
  readonly attempt: number;
  readonly fencingToken: number;
  readonly payloadJson: string;
  readonly leaseMs: number;
  readonly nodeId: string;
  /** Bytes of output the node keeps for the run when the handler streams it; 0: none. */
  readonly outputMaxBytes: number;
}

/** Streams part of a run's output (stdout, stderr, a log line) to the node holding its lease. */
export type RunOutputWriter = (text: string) => void;

/** What a handler may return: a short output kept in the attempt record. */
export interface WorkerResult {
  readonly output?: string;
}

/** Throw this from a handler for a failure that must not be retried (the run goes to the DLQ). */
export class PermanentRunError extends Error {
  override readonly name = 'PermanentRunError';
}

/** Throw this from a handler to ask for a retry no sooner than `retryAfterMs`. */
export class RetryRunError extends Error {
  override readonly name = 'RetryRunError';
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super(message);
  }
}

export interface WorkerLogger {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

export interface WorkerOptions {
  /** Client API addresses to discover the cluster from (any node will do). */
  readonly endpoints: readonly string[];
  /**
   * A `worker` token of the tenant whose runs this worker takes (or an admin token: every
   * tenant's); none when the cluster runs without authentication.
   */
  readonly token?: string | undefined;
  readonly workerId: string;
  readonly pool: string;
  readonly tags?: readonly string[];
  /** Handlers run at once per node stream. @default 1 */
  readonly capacity?: number;
  readonly handle: (
    run: LeasedRun,
    signal: AbortSignal,
    output: RunOutputWriter,
  ) => Promise<WorkerResult | void>;
  readonly log?: WorkerLogger;
  /** How often the node list is looked up again. @default 5000 */
  readonly discoverEveryMs?: number;
  /** Called for every ack a node refused (a stale completion or renewal), for tests and logs. */
  readonly onRefused?: (fireId: string, kind: string, reason: string) => void;
  /** TLS for a cluster started with `--tls-cert`, as ApiClient takes it; plaintext when absent. */
  readonly tls?: ClientTlsOptions;
}

const RECONNECT_MIN_MS = 200;
const RECONNECT_MAX_MS = 5000;
/** Output is gathered this long before it is sent... */
const OUTPUT_FLUSH_MS = 100;
/** ...or until this many characters wait. */
const OUTPUT_FLUSH_CHARS = 32 * 1024;

type Msg = Readonly<Record<string, unknown>>;

interface Running {
  readonly run: LeasedRun;
  readonly abort: AbortController;
  renewTimer: NodeJS.Timeout | undefined;
  readonly output: OutputBuffer;
}

/** A run's streamed output on its way to the node: batched, and bounded by the lease's bound. */
class OutputBuffer {
  private pending = '';
  private sentBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly maxBytes: number,
    private readonly send: (chunk: string) => void,
  ) {}

  write(text: string): void {
    // Past the node's bound it would only be dropped there.
    if (this.closed || text === '' || this.sentBytes >= this.maxBytes) return;
    this.pending += text;
    if (this.pending.length >= OUTPUT_FLUSH_CHARS) this.flush();
    else if (this.timer === undefined) {
      this.timer = setTimeout(() => this.flush(), OUTPUT_FLUSH_MS);
      this.timer.unref();
    }
  }

  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.closed || this.pending === '') return;
    const chunk = this.pending;
    this.pending = '';
    this.sentBytes += Buffer.byteLength(chunk);
    this.send(chunk);
  }

  /** The run is over here (completed, revoked, stream gone): what waits is dropped. */
  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.closed = true;
    this.pending = '';
  }
}

/** One node's stream, opened again after it fails until the worker stops. */
class NodeStream {
  private call: grpc.ClientDuplexStream<Msg, Msg> | undefined;
  private readonly running = new Map<string, Running>();
  private retryMs = RECONNECT_MIN_MS;
  private timer: NodeJS.Timeout | undefined;
  stopped = false;

  constructor(
    readonly address: string,
    private readonly client: grpc.Client,
    private readonly opts: WorkerOptions,
    private readonly track: (p: Promise<void>) => void,
  ) {}

  get runningCount(): number {
    return this.running.size;
  }

  open(): void {
    if (this.stopped) return;
    const def = clientServices().WorkerService.service['Work'];
    if (def === undefined) throw new Error('WorkerService.Work is missing from the proto');
    const call = this.client.makeBidiStreamRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      bearerMetadata(this.opts.token),
      {},
    ) as grpc.ClientDuplexStream<Msg, Msg>;
    this.call = call;
    call.write({
      hello: {
        workerId: this.opts.workerId,
        pool: this.opts.pool,
        tags: [...(this.opts.tags ?? [])],
        capacity: this.opts.capacity ?? 1,
      },
    });
    call.on('data', (m: Msg) => {
      this.retryMs = RECONNECT_MIN_MS;
      this.onCommand(call, m);
    });
    call.on('error', (err: grpc.ServiceError) => {
      if (!this.stopped && err.code !== grpc.status.CANCELLED) {
        this.opts.log?.warn(
          { node: this.address, err: err.details || err.message },
          'worker stream failed',
        );
      }
      this.closed(call);
    });
    call.on('end', () => this.closed(call));
    call.on('close', () => this.closed(call));
  }

  private closed(call: grpc.ClientDuplexStream<Msg, Msg>): void {
    if (this.call !== call) return;
    this.call = undefined;
    // The node returns these runs for another attempt; their results would be refused.
    for (const r of this.running.values()) this.forget(r, 'stream ended');
    if (this.stopped) return;
    this.timer = setTimeout(() => this.open(), this.retryMs);
    this.retryMs = Math.min(RECONNECT_MAX_MS, this.retryMs * 2);
  }

  private forget(r: Running, why: string): void {
    if (r.renewTimer) clearInterval(r.renewTimer);
    r.output.close();
    r.abort.abort(new Error(why));
    this.running.delete(r.run.fireId);
  }

  private onCommand(call: grpc.ClientDuplexStream<Msg, Msg>, m: Msg): void {
    const lease = m['lease'] as Msg | null | undefined;
    const ack = m['ack'] as Msg | null | undefined;
    const revoked = m['revoked'] as Msg | null | undefined;
    if (lease) {
      const run: LeasedRun = {
        jobId: String(lease['jobId']),
        tenant: String(lease['tenant']),
        fireId: String(lease['fireId']),
        slotMs: Number(lease['slotMs']),
        slot: String(lease['slot']),
        attempt: Number(lease['attempt']),
        fencingToken: Number(lease['fencingToken']),
        payloadJson: String(lease['payloadJson']),
        leaseMs: Number(lease['leaseMs']),
        nodeId: String(lease['nodeId']),
        // A node that predates streamed output sends none: stream nothing to it.
        outputMaxBytes: Number(lease['outputMaxBytes'] ?? 0),
      };
      this.start(call, run);
    } else if (ack && ack['ok'] !== true) {
      this.opts.onRefused?.(String(ack['fireId']), String(ack['kind']), String(ack['reason']));
      // A refused renewal or output part: the node no longer holds the lease for this attempt.
      if (ack['kind'] === 'renew' || ack['kind'] === 'output') {
        const r = this.running.get(String(ack['fireId']));
        if (r && r.run.fencingToken === Number(ack['fencingToken']))
          this.forget(r, String(ack['reason']));
      }
    } else if (revoked) {
      const r = this.running.get(String(revoked['fireId']));
      if (r && r.run.fencingToken === Number(revoked['fencingToken'])) {
        this.forget(r, String(revoked['reason']));
      }
    }
  }

  private start(call: grpc.ClientDuplexStream<Msg, Msg>, run: LeasedRun): void {
    const had = this.running.get(run.fireId);
    if (had) this.forget(had, 'superseded by a newer lease');
    const r: Running = {
      run,
      abort: new AbortController(),
      renewTimer: undefined,
      output: new OutputBuffer(run.outputMaxBytes, (chunk) => {
        if (this.call === call && !r.abort.signal.aborted)
          call.write({ output: { fireId: run.fireId, fencingToken: run.fencingToken, chunk } });
      }),
    };
    this.running.set(run.fireId, r);
    // Renewed three times per lease, so one lost renewal does not lose the lease.
    r.renewTimer = setInterval(
      () => {
        if (this.call === call && !r.abort.signal.aborted) {
          call.write({ renew: { fireId: run.fireId, fencingToken: run.fencingToken } });
        }
      },
      Math.max(50, Math.floor(run.leaseMs / 3)),
    );
    const done = (completion: Record<string, unknown>): void => {
      if (r.renewTimer) clearInterval(r.renewTimer);
      if (r.abort.signal.aborted || this.running.get(run.fireId) !== r) return;
      // The output goes before the completion, on the same stream: the node keeps it in order.
      r.output.flush();
      r.output.close();
      this.running.delete(run.fireId);
      if (this.call === call) {
        call.write({
          complete: { fireId: run.fireId, fencingToken: run.fencingToken, ...completion },
        });
      }
    };
    let p: Promise<WorkerResult | void>;
    try {
      p = this.opts.handle(run, r.abort.signal, (text) => r.output.write(text));
    } catch (err) {
      p = Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    this.track(
      p.then(
        (res) => done({ success: true, output: res?.output ?? '' }),
        (err: unknown) => {
          const message = err instanceof Error ? err.message : String(err);
          if (err instanceof RetryRunError) {
            done({
              success: false,
              retryable: true,
              error: message,
              retryAfterMs: err.retryAfterMs,
            });
          } else {
            done({
              success: false,
              retryable: !(err instanceof PermanentRunError),
              error: message,
            });
          }
        },
      ),
    );
  }

  /** Asks the node for no more leases; the stream stays open for the completions. */
  drain(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.call?.write({ drain: {} });
  }

  /** Half-closes the stream; resolves once the node closed it, or after `maxMs`. */
  end(maxMs: number): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const call = this.call;
    if (call === undefined) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, maxMs);
      const done = (): void => {
        clearTimeout(timer);
        resolve();
      };
      call.once('close', done);
      call.once('error', done);
      call.once('status', done);
      call.end();
    });
  }

  /** Ends the stream at once (handlers in flight are aborted). */
  cancel(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.call?.cancel();
    for (const r of this.running.values()) this.forget(r, 'worker stopped');
  }
}

export class Worker {
  private readonly streams = new Map<string, NodeStream>();
  private readonly clients = new Map<string, grpc.Client>();
  private readonly inflight = new Set<Promise<void>>();
  /** Lookups in a row that did not list a node this worker has a stream to. */
  private readonly missing = new Map<string, number>();
  private discoverTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly credentials: grpc.ChannelCredentials;

  constructor(private readonly opts: WorkerOptions) {
    this.credentials = clientCredentials(opts.tls);
  }

  /** Nodes with an open (or reopening) stream. */
  get nodes(): string[] {
    return [...this.streams.keys()].sort();
  }

  get runningCount(): number {
    let n = 0;
    for (const s of this.streams.values()) n += s.runningCount;
    return n;
  }

  /** Finds the nodes and opens a stream to each; resolves once the first lookup is done. */
  async start(): Promise<void> {
    await this.discover();
    if (this.stopped) return;
    this.discoverTimer = setInterval(() => {
      void this.discover();
    }, this.opts.discoverEveryMs ?? 5000);
  }

  private async discover(): Promise<void> {
    const found = new Set<string>();
    let listed = false;
    for (const endpoint of this.opts.endpoints) {
      const client = new ApiClient(
        endpoint,
        3000,
        {},
        { token: this.opts.token, tls: this.opts.tls },
      );
      try {
        const res = await client.call<{ nodes: Array<{ apiAddress: string }> }>(
          'AdminService',
          'ClusterStatus',
          {},
        );
        for (const n of res.nodes) if (n.apiAddress !== '') found.add(n.apiAddress);
        // An answer naming no node is no list to close streams by.
        listed = found.size > 0;
        break;
      } catch {
        // Try the next endpoint; with none answering, the streams already open stay.
      } finally {
        client.close();
      }
    }
    // Before any lookup succeeded, the endpoints themselves are the best guess.
    if (found.size === 0 && this.streams.size === 0)
      for (const e of this.opts.endpoints) found.add(e);
    if (this.stopped) return;
    if (listed) {
      // A node removed from the cluster leads nothing any more: its stream is closed once two
      // lookups in a row left it out (one answer may come from a replica that is behind).
      for (const [address, s] of this.streams) {
        if (found.has(address)) {
          this.missing.delete(address);
          continue;
        }
        const misses = (this.missing.get(address) ?? 0) + 1;
        this.missing.set(address, misses);
        if (misses < 2) continue;
        this.missing.delete(address);
        s.cancel();
        this.streams.delete(address);
        this.clients.get(address)?.close();
        this.clients.delete(address);
        this.opts.log?.info({ node: address }, 'worker stream closed: the node left the cluster');
      }
    }
    for (const address of found) {
      if (this.streams.has(address)) continue;
      const ctor = clientServices().WorkerService;
      // Pings find a node whose host vanished while the stream is idle (no FIN to read).
      const client = new ctor(address, this.credentials, {
        'grpc.keepalive_time_ms': 10_000,
        'grpc.keepalive_timeout_ms': 10_000,
        'grpc.keepalive_permit_without_calls': 1,
      });
      this.clients.set(address, client);
      const s = new NodeStream(address, client, this.opts, (p) => {
        this.inflight.add(p);
        void p.finally(() => this.inflight.delete(p));
      });
      this.streams.set(address, s);
      s.open();
      this.opts.log?.info({ node: address }, 'worker stream opened');
    }
  }

  /**
   * Stops taking leases; with `drainMs` > 0 waits that long for the handlers in flight to finish
   * and complete, then ends every stream (what is still running is aborted).
   */
  async stop(drainMs = 0): Promise<void> {
    this.stopped = true;
    if (this.discoverTimer) clearInterval(this.discoverTimer);
    if (drainMs > 0) for (const s of this.streams.values()) s.drain();
    if (drainMs > 0 && this.inflight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inflight]),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, drainMs);
        }),
      ]);
      if (timer) clearTimeout(timer);
    }
    // Half-closed, not cancelled: completions written just now still leave, and the node ends
    // each stream once it has read them. A stream not closed within a second is cancelled.
    await Promise.all([...this.streams.values()].map((s) => s.end(1000)));
    for (const s of this.streams.values()) s.cancel();
    for (const c of this.clients.values()) c.close();
    this.streams.clear();
    this.clients.clear();
  }
}
