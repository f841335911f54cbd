/**
 * Real `tickraft serve` processes on loopback for integration tests: free ports, temp data
 * dirs, a DebugService client per node (each node serves it on a port of its own,
 * `--debug-listen`), waiting on status (never on sleeps), kill -9 and restart, and cleanup
 * registered with tap's teardown so no process outlives a failed test. Nodes may send webhooks to
 * loopback (`--allow-target 127.0.0.0/8`, where the tests' sinks listen) unless a cluster is
 * created with `allowTarget: []`.
 */
import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiClient, type ApiClientOptions, type ClientTlsOptions } from '../../src/api/client.js';
import { loadDebugService } from '../../src/server/debug-service.js';
import { ensureOpenssl, TestCa } from './certs.js';
import { nodeCommand } from './node-child.js';

/**
 * The admin token of every cluster this test process starts: one per process, so that tickctl
 * processes the tests run (test/helpers/tickctl.ts) carry it by default as TICKRAFT_TOKEN.
 */
export const TEST_ADMIN_TOKEN = randomBytes(32).toString('hex');

const BIN = fileURLToPath(new URL('../../bin/tickraft', import.meta.url));

/**
 * What the harness's nodes may send webhooks to by default: loopback, where every test sink, the
 * chaos receivers and the benchmarks' sinks listen (the default policy refuses it).
 */
export const LOOPBACK_TARGETS: readonly string[] = ['127.0.0.0/8'];

/**
 * A random loopback address (127.x.y.z). Each test cluster listens on its own address, so test
 * files running in parallel can never take each other's ports between freePort() and bind.
 */
export function randomLoopbackHost(): string {
  const octet = (): number => 1 + Math.floor(Math.random() * 250);
  return `127.${octet()}.${octet()}.${octet()}`;
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface GroupStatus {
  groupId: number;
  role: string;
  term: number;
  leader: string;
  commit: number;
  applied: number;
  lastIndex: number;
  voters: string[];
  votersOutgoing: string[];
  learners: string[];
  keys: number;
  quiesced: boolean;
  /** The replica's leadership timeline (proto/debug.proto GroupStatus): wall ms, 0 unknown. */
  ledTerm: number;
  campaignAtMs: number;
  electedAtMs: number;
  caughtUpAtMs: number;
  leaseAtMs: number;
  firstHandOutAtMs: number;
}

export interface NodeStatus {
  nodeId: string;
  metaInitialized: boolean;
  groups: GroupStatus[];
  metaMembers: number;
  metaGroups: number;
  snapshotsInstalled: number;
  snapshotsTaken: number;
  loopTurns: number;
  loopCommits: number;
  entriesPersisted: number;
  fsyncMsTotal: number;
  messagesSent: number;
  schedulerProposed: number;
  schedulerDelivered: number;
  schedulerResults: number;
  deliveryQueued: number;
  deliveryInflight: number;
  deliveryPrerendered: number;
  deliverySentPrerendered: number;
  deliveryLeaseWaits: number;
  cpuMs: number;
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  arrayBuffersBytes: number;
  gcForced: boolean;
  gcPauses: number;
  gcPauseP50Ms: number;
  gcPauseP99Ms: number;
  gcPauseMaxMs: number;
  gcPauseTotalMs: number;
  snapshotBytesTotal: number;
  snapshotEncodeMsTotal: number;
  snapshotEncodeMsMax: number;
  snapshotWriteMsTotal: number;
  snapshotsRestored: number;
  snapshotRestoreBytes: number;
  snapshotRestoreMs: number;
  startupStoreOpenMs: number;
  startupGroupsOpenMs: number;
  startupStartedMs: number;
  uptimeMs: number;
}

/** One group's snapshot taken on request (DebugService.TakeSnapshots). */
export interface SnapshotTaken {
  groupId: number;
  index: number;
  bytes: number;
  encodeMs: number;
  writeMs: number;
}

type Unary<Req, Res> = (
  req: Req,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: Res) => void,
) => void;

interface DebugClient extends grpc.Client {
  put: Unary<{ key: string; value: string }, { groupId: number }>;
  putBatch: Unary<{ puts: { key: string; value: string }[] }, { committed: number }>;
  get: Unary<{ key: string }, { found: boolean; value: string; groupId: number }>;
  status: Unary<{ collectGarbage?: boolean; gcSinceMs?: number }, NodeStatus>;
  scheduler: Unary<{ json: string }, { json: string }>;
  takeSnapshots: Unary<Record<string, never>, { snapshots: SnapshotTaken[] }>;
}

function call<Req, Res>(
  fn: Unary<Req, Res>,
  client: grpc.Client,
  req: Req,
  timeoutMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn.call(client, req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => {
      if (err) reject(err);
      else resolve(res);
    });
  });
}

export class ProcNode {
  proc: ChildProcess | undefined;
  client: DebugClient;
  stderr = '';
  stdout = '';
  /** The node's --metrics-listen port, when the cluster was created with metrics. */
  metricsPort: number | undefined;
  /** The node's --http-listen port (the HTTP/JSON API), when the cluster was created with http. */
  httpPort: number | undefined;
  /** Flags of this node alone, given at every start (e.g. --peer-route through proxies). */
  ownArgs: string[] = [];
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
  /** Environment added to every start (e.g. a libfaketime preload for the clock nemesis). */
  env: Record<string, string> = {};
  /** When set, the node's stdout and stderr are also appended to this file (kept across restarts). */
  logPath: string | undefined;
  /** Real time (Date.now()) of the last start, for libfaketime rate maths. */
  startedAtMs = 0;

  constructor(
    readonly id: string,
    readonly apiPort: number,
    readonly peerPort: number,
    readonly dataDir: string,
    private readonly args: () => string[],
    readonly host: string,
    /** Where the node serves DebugService (its `--debug-listen` port), which `client` dials. */
    readonly debugPort: number,
  ) {
    const Ctor = loadDebugService();
    this.client = new Ctor(
      `${host}:${debugPort}`,
      grpc.credentials.createInsecure(),
    ) as unknown as DebugClient;
  }

  start(extraArgs: string[] = []): void {
    this.stderr = '';
    this.stdout = '';
    // TICKRAFT_NODE_ARGS passes flags to the node processes' `node`, e.g. --cpu-prof for benches.
    const nodeArgs = (process.env['TICKRAFT_NODE_ARGS'] ?? '').split(' ').filter((a) => a !== '');
    const env = { ...process.env, ...this.env };
    const [command, args] = nodeCommand(
      [...nodeArgs, BIN, 'serve', ...this.args(), ...this.ownArgs, ...extraArgs],
      env,
    );
    const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    this.startedAtMs = Date.now();
    const logPath = this.logPath;
    if (logPath !== undefined) {
      appendFileSync(logPath, `--- ${new Date().toISOString()} start pid ${proc.pid ?? '?'}\n`);
      const append = (d: Buffer): void => appendFileSync(logPath, d);
      proc.stdout.on('data', append);
      proc.stderr.on('data', append);
    }
    proc.stdout.on('data', (d: Buffer) => {
      this.stdout += d.toString();
      if (this.stdout.length > 200_000) this.stdout = this.stdout.slice(-100_000);
    });
    proc.stderr.on('data', (d: Buffer) => {
      this.stderr += d.toString();
      if (this.stderr.length > 200_000) this.stderr = this.stderr.slice(-100_000);
    });
    this.exit = new Promise((resolve) =>
      proc.on('exit', (code, signal) => resolve({ code, signal })),
    );
    this.proc = proc;
  }

  get running(): boolean {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  async kill9(): Promise<void> {
    if (!this.running) return;
    this.proc!.kill('SIGKILL');
    await this.exit;
  }

  async term(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.running) return (await this.exit) ?? { code: null, signal: null };
    this.proc!.kill('SIGTERM');
    return this.exit!;
  }

  status(timeoutMs = 2000): Promise<NodeStatus> {
    return call(this.client.status, this.client, {}, timeoutMs);
  }

  /** Status with the garbage-collection pauses that ended at or after `sinceMs` (wall clock). */
  gcSince(sinceMs: number, timeoutMs = 5000): Promise<NodeStatus> {
    return call(this.client.status, this.client, { gcSinceMs: sinceMs }, timeoutMs);
  }

  /** Snapshots every group of the node now; what each cost. */
  async takeSnapshots(timeoutMs = 300_000): Promise<SnapshotTaken[]> {
    return (await call(this.client.takeSnapshots, this.client, {}, timeoutMs)).snapshots;
  }

  /**
   * The node's memory after a full collection (the process needs `--expose-gc` in
   * TICKRAFT_NODE_ARGS for the collection to run: `gcForced` says whether it did).
   */
  memory(timeoutMs = 30_000): Promise<NodeStatus> {
    return call(this.client.status, this.client, { collectGarbage: true }, timeoutMs);
  }

  put(key: string, value: string, timeoutMs = 3000): Promise<{ groupId: number }> {
    return call(this.client.put, this.client, { key, value }, timeoutMs);
  }

  get(key: string, timeoutMs = 3000): Promise<{ found: boolean; value: string; groupId: number }> {
    return call(this.client.get, this.client, { key }, timeoutMs);
  }

  /** A scheduler admin request (DebugService.Scheduler) on this node. */
  async scheduler(req: Record<string, unknown>, timeoutMs = 3000): Promise<unknown> {
    const res = await call(
      this.client.scheduler,
      this.client,
      { json: JSON.stringify(req) },
      timeoutMs,
    );
    return JSON.parse(res.json) as unknown;
  }

  /** SIGSTOP / SIGCONT: the process freezes with its sockets open, as in a long GC pause. */
  paused = false;

  pause(): void {
    this.proc?.kill('SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    this.proc?.kill('SIGCONT');
    this.paused = false;
  }

  close(): void {
    this.client.close();
  }
}

export interface ClusterOptions {
  nodes?: number;
  groups?: number;
  extraArgs?: string[];
  /** Give each node a --metrics-listen address (ProcNode.metricsPort). */
  metrics?: boolean;
  /** Give each node an --http-listen address, the HTTP/JSON API (ProcNode.httpPort). */
  http?: boolean;
  /**
   * `--allow-target` ranges of every node; [] gives none (the default policy: no loopback).
   * @default LOOPBACK_TARGETS
   */
  allowTarget?: readonly string[];
  /**
   * Pass `--debug-listen` (DebugService on ProcNode.debugPort). Without it the node serves no
   * DebugService, so status(), waitReady() and the scheduler helpers cannot reach it.
   * @default true
   */
  debugService?: boolean;
  /**
   * How callers are checked and what is encrypted: `auth` (the default: the admin token file,
   * plaintext), `auth+tls` (also TLS on the client API and mutual TLS between nodes, with
   * certificates openssl makes in the cluster's directory), or `off` (--insecure-no-auth,
   * plaintext: what the benchmark compares against).
   * @default 'auth'
   */
  security?: ClusterSecurity;
}

export type ClusterSecurity = 'off' | 'auth' | 'auth+tls';

/**
 * The flags node `i` gets for the cluster's security: the token file, or --insecure-no-auth; and
 * under auth+tls each node's API and peer certificates (made here, with openssl, as
 * docs/OPERATIONS.md shows) and the client certificate the cluster's callers use.
 */
function securityArgsOf(cluster: ProcCluster, host: string, n: number): (i: number) => string[] {
  if (cluster.security === 'off') return () => ['--insecure-no-auth'];
  const token = ['--admin-token-file', cluster.tokenFile];
  if (cluster.security === 'auth') return () => token;
  ensureOpenssl();
  const apiCa = TestCa.create(cluster.root, 'api-ca');
  const peerCa = TestCa.create(cluster.root, 'peer-ca');
  const caller = apiCa.issue('caller', []);
  cluster.clientTls = { ca: apiCa.pem, cert: caller.certPem, key: caller.keyPem };
  const perNode = Array.from({ length: n }, (_, i) => {
    const api = apiCa.issue(`n${i + 1}`, [host]);
    const peer = peerCa.issue(`n${i + 1}-peer`, [host]);
    return [
      ...token,
      ...['--tls-cert', api.cert, '--tls-key', api.key, '--tls-client-ca', apiCa.cert],
      ...['--peer-tls-cert', peer.cert, '--peer-tls-key', peer.key, '--peer-tls-ca', peerCa.cert],
    ];
  });
  return (i) => perNode[i]!;
}

export class ProcCluster {
  readonly nodes: ProcNode[] = [];
  readonly root: string;
  /** The bootstrap admin token every node is started with (--admin-token-file). */
  readonly adminToken = TEST_ADMIN_TOKEN;
  /** The file holding adminToken (mode 0600). */
  readonly tokenFile: string;

  private constructor(root: string) {
    this.root = root;
    this.tokenFile = join(root, 'admin.token');
    writeFileSync(this.tokenFile, `${this.adminToken}\n`, { mode: 0o600 });
  }

  /** An ApiClient for a node, calling with the admin token. */
  client(node: ProcNode | string, timeoutMs = 10_000): ApiClient {
    const n = typeof node === 'string' ? this.node(node) : node;
    return new ApiClient(`${n.host}:${n.apiPort}`, timeoutMs, {}, this.clientOptions());
  }

  /** How an ApiClient calls this cluster as its admin: the token (and TLS, under auth+tls). */
  clientOptions(): ApiClientOptions {
    return {
      ...(this.security === 'off' ? {} : { token: this.adminToken }),
      ...(this.clientTls === undefined ? {} : { tls: this.clientTls }),
    };
  }

  security: ClusterSecurity = 'auth';
  /** Under auth+tls: the CA of the nodes' API certificates and a client certificate it signed. */
  clientTls: ClientTlsOptions | undefined;

  /** Environment for a tickctl process that calls this cluster with the admin token. */
  tickctlEnv(): NodeJS.ProcessEnv {
    return { ...process.env, TICKRAFT_TOKEN: this.adminToken };
  }

  static async create(opts: ClusterOptions = {}): Promise<ProcCluster> {
    const n = opts.nodes ?? 3;
    const root = mkdtempSync(join(tmpdir(), 'tickraft-it-'));
    const cluster = new ProcCluster(root);
    const host = randomLoopbackHost();
    const ports: {
      api: number;
      peer: number;
      debug: number;
      metrics: number | undefined;
      http: number | undefined;
    }[] = [];
    // The kernel may hand the same free port out twice in a row; every port must be distinct.
    const taken = new Set<number>();
    const distinctPort = async (): Promise<number> => {
      for (;;) {
        const port = await freePort(host);
        if (!taken.has(port)) {
          taken.add(port);
          return port;
        }
      }
    };
    for (let i = 0; i < n; i++)
      ports.push({
        api: await distinctPort(),
        peer: await distinctPort(),
        debug: await distinctPort(),
        metrics: opts.metrics === true ? await distinctPort() : undefined,
        http: opts.http === true ? await distinctPort() : undefined,
      });
    const allowTarget = opts.allowTarget ?? LOOPBACK_TARGETS;
    cluster.security = opts.security ?? 'auth';
    const securityArgs = securityArgsOf(cluster, host, n);
    const initial = ports.map((p, i) => `n${i + 1}=${host}:${p.peer}`).join(',');
    for (let i = 0; i < n; i++) {
      const id = `n${i + 1}`;
      const p = ports[i]!;
      const dataDir = join(root, id);
      const args = (): string[] => [
        '--id',
        id,
        '--data-dir',
        dataDir,
        '--listen',
        `${host}:${p.api}`,
        '--peer-listen',
        `${host}:${p.peer}`,
        '--initial-cluster',
        initial,
        '--groups',
        String(opts.groups ?? 16),
        ...(p.metrics === undefined ? [] : ['--metrics-listen', `${host}:${p.metrics}`]),
        ...(p.http === undefined ? [] : ['--http-listen', `${host}:${p.http}`]),
        ...securityArgs(i),
        ...(opts.debugService === false ? [] : ['--debug-listen', `${host}:${p.debug}`]),
        ...allowTarget.flatMap((cidr) => ['--allow-target', cidr]),
        ...(opts.extraArgs ?? []),
      ];
      const node = new ProcNode(id, p.api, p.peer, dataDir, args, host, p.debug);
      // TICKRAFT_NODE_LOG_DIR keeps each node's output (its log, and what TICKRAFT_NODE_ARGS
      // such as --trace-gc print) in <dir>/<id>.log, for a bench run looked at afterwards.
      const logDir = process.env['TICKRAFT_NODE_LOG_DIR'];
      if (logDir !== undefined && logDir !== '') {
        mkdirSync(logDir, { recursive: true });
        node.logPath = join(logDir, `${id}.log`);
      }
      node.metricsPort = p.metrics;
      node.httpPort = p.http;
      cluster.nodes.push(node);
    }
    return cluster;
  }

  node(id: string): ProcNode {
    const n = this.nodes.find((x) => x.id === id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  startAll(): void {
    for (const n of this.nodes) n.start();
  }

  /**
   * Every running node reports every group it hosts with a leader, and the meta group is set.
   * On a time-out the error carries each node's exit status and the end of its stderr.
   */
  async waitReady(timeoutMs = 30_000): Promise<NodeStatus[]> {
    try {
      return await this.untilReady(timeoutMs);
    } catch (err) {
      const why = this.nodes
        .map((n) => `${n.id} ${n.running ? 'running' : 'exited'}: ${n.stderr.slice(-600)}`)
        .join('\n');
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n${why}`);
    }
  }

  private async untilReady(timeoutMs: number): Promise<NodeStatus[]> {
    return eventually(async () => {
      const all: NodeStatus[] = [];
      for (const n of this.nodes.filter((x) => x.running)) {
        const st = await n.status(1000);
        if (!st.metaInitialized) throw new Error(`${n.id}: meta not initialized`);
        for (const g of st.groups)
          if (!g.leader) throw new Error(`${n.id}: group ${g.groupId} has no leader`);
        all.push(st);
      }
      return all;
    }, timeoutMs);
  }

  /** The current leader of each group, as seen by the nodes that lead. */
  async leaders(): Promise<Map<number, string>> {
    const out = new Map<number, string>();
    for (const n of this.nodes.filter((x) => x.running)) {
      const st = await n.status(1000).catch(() => undefined);
      for (const g of st?.groups ?? []) if (g.role === 'leader') out.set(g.groupId, n.id);
    }
    return out;
  }

  /** Puts through whichever node leads the key's group, following leader hints. */
  async put(key: string, value: string, timeoutMs = 5000): Promise<void> {
    await this.onLeader((n, ms) => n.put(key, value, ms), timeoutMs);
  }

  /**
   * A scheduler admin request through whichever node leads the job's group (or the meta group),
   * following leader hints. Errors other than "not the leader" are thrown at once.
   */
  async scheduler(req: Record<string, unknown>, timeoutMs = 10_000): Promise<unknown> {
    return this.onLeader((n, ms) => n.scheduler(req, ms), timeoutMs);
  }

  private async onLeader<T>(
    fn: (n: ProcNode, ms: number) => Promise<T>,
    timeoutMs: number,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let target = this.nodes.find((n) => n.running) ?? this.nodes[0]!;
    let lastErr: unknown;
    while (Date.now() < deadline) {
      try {
        return await fn(target, Math.max(100, deadline - Date.now()));
      } catch (err) {
        const code = (err as grpc.ServiceError).code;
        if (code !== grpc.status.UNAVAILABLE && code !== grpc.status.DEADLINE_EXCEEDED) throw err;
        lastErr = err;
        const hint = (err as grpc.ServiceError).metadata?.get('tickraft-leader')[0];
        const hinted =
          typeof hint === 'string' ? this.nodes.find((n) => n.id === hint && n.running) : undefined;
        const running = this.nodes.filter((n) => n.running);
        target = hinted ?? running[Math.floor(Math.random() * running.length)] ?? target;
        await sleep(hinted ? 0 : 50);
      }
    }
    throw lastErr instanceof Error ? lastErr : new Error('no leader answered');
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill9()));
    for (const n of this.nodes) n.close();
  }

  cleanup(): void {
    for (const n of this.nodes) {
      if (n.running) n.proc!.kill('SIGKILL');
      n.close();
    }
    rmSync(this.root, { recursive: true, force: true });
  }
}

export async function eventually<T>(
  fn: () => Promise<T>,
  timeoutMs: number,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      return await fn();
    } catch (err) {
      lastErr = err;
      await sleep(everyMs);
    }
  }
  throw new Error(
    `timed out after ${timeoutMs} ms: ${lastErr instanceof Error ? lastErr.message : String(lastErr)}`,
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
