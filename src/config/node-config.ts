/**
 * `tickraft serve` options in three stages: NodeOptions (flags or a JSON config file, every field
 * optional with a documented default) → compileNodeOptions() → CompiledNodeConfig (validated,
 * frozen). Every violation names the flag and the rule, and all of them are reported at once.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import {
  RUN_OUTPUT_ENTRY_OVERHEAD_BYTES,
  RUN_OUTPUT_MAX_BYTES_DEFAULT,
  RUN_OUTPUT_MAX_BYTES_LIMIT,
  RUN_OUTPUT_STORE_BYTES_DEFAULT,
} from '../delivery/run-output-store.js';
import { parseCidrList, TargetPolicy } from '../delivery/target-policy.js';
import { compileRaftOptions, type CompiledRaftConfig } from '../raft/config.js';
import type { NodeId } from '../raft/messages.js';
import { LOG_TAIL_BYTES_MAX_DEFAULT } from '../storage/group-log.js';
import { DEFAULT_METRICS_TENANTS, TENANT_LABELS_MAX } from '../observe/tenant-labels.js';

export interface NodeOptions {
  /** This node's id, e.g. n1. Required. */
  id?: string;
  /** Directory for the node's LevelDB. Required. */
  dataDir?: string;
  /** host:port of the client API. @default 127.0.0.1:7001 */
  listen?: string;
  /**
   * host:port clients are told to dial for this node's client API (ClusterStatus, and so the
   * workers' streams), when that is not --listen: a published port, a NAT, a proxy. Other nodes
   * still forward calls to --listen. @default the --listen address
   */
  advertiseAddress?: string;
  /** host:port of the peer (Raft) transport. @default 127.0.0.1:7101 */
  peerListen?: string;
  /** id=host:port,… of every initial node's peer address; needed only to create a cluster. */
  initialCluster?: string;
  /** Data groups of a new cluster. @default 16 */
  groups?: number;
  /** Milliseconds per Raft tick. @default 50 */
  tickMs?: number;
  /** Ticks without a leader before an election. @default 10 */
  electionTicks?: number;
  /** Ticks between heartbeats. @default 2 */
  heartbeatTicks?: number;
  /** Applied entries between snapshots of a group. @default 10000 */
  snapshotEntries?: number;
  /** Applied entry bytes between snapshots of a group. @default 67108864 (64 MiB) */
  snapshotBytes?: number;
  /**
   * Bytes of log entries each group keeps in memory; older committed entries are read from
   * LevelDB when a lagging follower or a restart needs them. @default 1048576 (1 MiB)
   */
  logTailBytes?: number;
  /** Idle ticks before a data group quiesces (stops heartbeating); 0 never. @default 20 */
  quiesceTicks?: number;
  /** How long SIGTERM may take to hand leaderships over before exiting anyway. @default 5000 */
  shutdownTimeoutMs?: number;
  /** Slots due within this many ms are proposed as fire intents ahead of time. @default 3000 */
  lookAheadMs?: number;
  /** A slot later than this (ms) counts as misfired and goes through the job's misfire policy. @default 5000 */
  misfireThresholdMs?: number;
  /**
   * Longest a leader holds attempt results back while deliveries wait to be sent (a spike), to
   * log them as few large entries once the backlog is gone; 0 logs each step's results at once.
   * @default 500
   */
  resultHoldMs?: number;
  /** A data group holding more jobs than this is split in two (range split); 0 never. @default 1000000 */
  splitJobs?: number;
  /**
   * A data group whose leader hands out more first attempts per second than this (averaged over
   * the last minute) is split in two; 0 never. @default 0
   */
  splitFireRate?: number;
  /** Connections one node opens to one webhook origin. @default 64 */
  webhookConnections?: number;
  /**
   * Deliveries in flight to one origin; beyond the connections they would queue in the HTTP
   * pool, outside the fair queue's order. @default webhookConnections
   */
  originInflight?: number;
  /** Deliveries of one tenant in flight on one node. @default 4096 */
  tenantInflight?: number;
  /** Deliveries waiting on one node before back-pressure (retried later). @default 200000 */
  deliveryQueue?: number;
  /**
   * Bytes of each attempt's output (a webhook's response body, a worker's stdout and stderr, a
   * CompleteRun's output) this node keeps in memory beside the log, for RunService.GetRunOutput;
   * 0 keeps none (the replicated excerpt stays). @default 65536
   */
  runOutputMaxBytes?: number;
  /**
   * Bytes of run output this node keeps in all; the attempts written to longest ago are evicted
   * first. @default 67108864 (64 MiB)
   */
  runOutputStoreBytes?: number;
  /** host:port of the HTTP server for /metrics, /healthz and /readyz; none when absent. */
  metricsListen?: string;
  /**
   * host:port of the HTTP/JSON API (src/http, docs/HTTP.md): each request is served as a call of
   * the client API on --listen, so it is authenticated and routed alike; HTTPS with the client
   * API's TLS flags. Not served when absent.
   */
  httpListen?: string;
  /**
   * Base URL of an OpenTelemetry collector's OTLP/HTTP receiver (e.g. http://127.0.0.1:4318):
   * spans of API calls and delivery attempts go to `<url>/v1/traces`, and webhooks carry a
   * `traceparent`. No tracing when absent.
   */
  otlpEndpoint?: string;
  /**
   * Tenants named in the per-tenant metrics (`tenant` label): the most active on this node; the
   * rest are `other`. 0 puts every tenant under `other`. @default 20
   */
  metricsTenants?: number;
  /**
   * host:port of the test-only DebugService (proto/debug.proto: a key-value store, scheduler
   * internals; unauthenticated); not served when absent.
   */
  debugListen?: string;
  /**
   * CIDR ranges webhooks may reach although the default policy forbids them (loopback, private,
   * link-local…: docs/API.md): a list, or one string of comma-separated ranges. @default none
   */
  allowTarget?: string | readonly string[];
  /** host:port of any running member's client API: an empty node joins that cluster. */
  join?: string;
  /**
   * id=host:port,… : dial these peers at these addresses instead of their advertised peer
   * addresses (the chaos suite puts a proxy on every link). Only this node's outgoing
   * connections change; what the cluster stores and other nodes dial stays the same.
   */
  peerRoute?: string;
  /**
   * File holding the bootstrap admin token; every node of a cluster is given the same one.
   * Required unless insecureNoAuth.
   */
  adminTokenFile?: string;
  /** Serve every call without authentication (loopback development only). */
  insecureNoAuth?: boolean;
  /**
   * PEM certificate (chain) of the client API: serve it with TLS (gRPC, and HTTPS on
   * --metrics-listen). Node-to-node forwarding and --join dial other nodes' client APIs with TLS
   * too, presenting this certificate when they require client certificates. Needs tlsKey.
   */
  tlsCert?: string;
  /** PEM private key of tlsCert. */
  tlsKey?: string;
  /** PEM CA bundle: the client API requires client certificates signed by it. Needs tlsCert. */
  tlsClientCa?: string;
  /**
   * PEM CA bundle this node verifies other nodes' client API certificates with when it forwards
   * a call or joins. Needs tlsCert. @default tlsClientCa if given, else the system's roots
   */
  tlsCa?: string;
  /** PEM certificate (chain) of this node on the peer transport (mutual TLS). All three peer TLS options go together. */
  peerTlsCert?: string;
  /** PEM private key of peerTlsCert. */
  peerTlsKey?: string;
  /** PEM CA bundle of the cluster: every peer's certificate must be signed by it. */
  peerTlsCa?: string;
}

/** Files of the client API's TLS (`--tls-*`). */
export interface ApiTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** Client certificates are required, signed by this CA. */
  readonly clientCaFile: string | undefined;
  /** The CA other nodes' API certificates are verified with (--tls-ca). */
  readonly caFile: string | undefined;
}

/** Files of the peer transport's mutual TLS (`--peer-tls-*`). */
export interface PeerTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
}

export interface DeliveryConfig {
  readonly connectionsPerOrigin: number;
  readonly originInflightMax: number;
  readonly tenantInflightMax: number;
  readonly queuedMax: number;
  /** Which addresses webhooks may reach: the default policy widened by --allow-target. */
  readonly targetPolicy: TargetPolicy;
  /** Bytes of each attempt's output kept beside the log; 0: none (run-output-store.ts). */
  readonly runOutputMaxBytes: number;
  /** Bytes of run output kept in all. */
  readonly runOutputStoreBytes: number;
}

export interface SchedulerConfig {
  readonly lookAheadMs: number;
  readonly misfireThresholdMs: number;
  readonly resultHoldMs: number;
}

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export interface CompiledNodeConfig {
  readonly id: NodeId;
  readonly dataDir: string;
  readonly listen: HostPort;
  /** What clients are told to dial for this node's API; undefined: the --listen address. */
  readonly advertiseAddress: HostPort | undefined;
  readonly peerListen: HostPort;
  readonly initialCluster: ReadonlyMap<NodeId, string> | undefined;
  readonly groups: number;
  readonly tickMs: number;
  readonly raft: CompiledRaftConfig;
  readonly snapshotEveryEntries: number;
  readonly snapshotEveryBytes: number;
  readonly logTailBytesMax: number;
  readonly shutdownTimeoutMs: number;
  /** Job count above which the meta leader splits a data group; 0 = never automatically. */
  readonly splitJobs: number;
  /** Fires per second above which the meta leader splits a data group; 0 = never. */
  readonly splitFireRate: number;
  readonly scheduler: SchedulerConfig;
  readonly delivery: DeliveryConfig;
  /** The metrics and health HTTP address, or undefined: the node serves no HTTP. */
  readonly metricsListen: HostPort | undefined;
  /** The HTTP/JSON API's address, or undefined: not served. */
  readonly httpListen: HostPort | undefined;
  /** The OTLP/HTTP collector spans go to, or undefined: no tracing. */
  readonly otlpEndpoint: string | undefined;
  /** Tenants labelled by name in the per-tenant metrics; the rest are `other`. */
  readonly metricsTenants: number;
  /** The test-only DebugService's address, or undefined: not served. */
  readonly debugListen: HostPort | undefined;
  /** The client API address of a member to join through, or undefined. */
  readonly join: string | undefined;
  /** Peers this node dials at an address other than their advertised one (--peer-route). */
  readonly peerRoutes: ReadonlyMap<NodeId, string>;
  /** The bootstrap admin token's file; undefined exactly when insecureNoAuth. */
  readonly adminTokenFile: string | undefined;
  readonly insecureNoAuth: boolean;
  /** TLS of the client API (and metrics); undefined: plaintext. */
  readonly apiTls: ApiTlsFiles | undefined;
  /** Mutual TLS of the peer transport; undefined: plaintext. */
  readonly peerTls: PeerTlsFiles | undefined;
}

/** The flag each option is set by, used to name it in errors. */
export const OPTION_FLAGS: Record<keyof NodeOptions, string> = {
  id: '--id',
  dataDir: '--data-dir',
  listen: '--listen',
  advertiseAddress: '--advertise-address',
  peerListen: '--peer-listen',
  initialCluster: '--initial-cluster',
  groups: '--groups',
  tickMs: '--tick-ms',
  electionTicks: '--election-ticks',
  heartbeatTicks: '--heartbeat-ticks',
  snapshotEntries: '--snapshot-entries',
  quiesceTicks: '--quiesce-ticks',
  snapshotBytes: '--snapshot-bytes',
  logTailBytes: '--log-tail-bytes',
  shutdownTimeoutMs: '--shutdown-timeout-ms',
  lookAheadMs: '--look-ahead-ms',
  misfireThresholdMs: '--misfire-threshold-ms',
  resultHoldMs: '--result-hold-ms',
  splitJobs: '--split-jobs',
  splitFireRate: '--split-fire-rate',
  webhookConnections: '--webhook-connections',
  originInflight: '--origin-inflight',
  tenantInflight: '--tenant-inflight',
  deliveryQueue: '--delivery-queue',
  runOutputMaxBytes: '--run-output-max-bytes',
  runOutputStoreBytes: '--run-output-store-bytes',
  metricsListen: '--metrics-listen',
  httpListen: '--http-listen',
  otlpEndpoint: '--otlp-endpoint',
  metricsTenants: '--metrics-tenants',
  debugListen: '--debug-listen',
  allowTarget: '--allow-target',
  join: '--join',
  peerRoute: '--peer-route',
  adminTokenFile: '--admin-token-file',
  insecureNoAuth: '--insecure-no-auth',
  tlsCert: '--tls-cert',
  tlsKey: '--tls-key',
  tlsClientCa: '--tls-client-ca',
  tlsCa: '--tls-ca',
  peerTlsCert: '--peer-tls-cert',
  peerTlsKey: '--peer-tls-key',
  peerTlsCa: '--peer-tls-ca',
};

const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

export function parseHostPort(text: string): HostPort | string {
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  if (!m) return `must be host:port, got '${text}'`;
  const port = Number(m[2]);
  if (port > 65535) return `port must be at most 65535, got ${port}`;
  return { host: m[1]!, port };
}

export function formatHostPort(hp: HostPort): string {
  return `${hp.host}:${hp.port}`;
}

/** Keep-alive connections per webhook origin and node (`--webhook-connections`). */
export const DEFAULT_WEBHOOK_CONNECTIONS = 64;

export function compileNodeOptions(options: NodeOptions): CompiledNodeConfig {
  const violations: FieldViolation[] = [];
  const bad = (key: keyof NodeOptions, reason: string): void => {
    violations.push({ field: OPTION_FLAGS[key], reason });
  };
  const id = options.id ?? '';
  if (id === '') bad('id', 'is required');
  else if (!ID_PATTERN.test(id)) bad('id', `must match ${ID_PATTERN.source}, got '${id}'`);
  const dataDir = options.dataDir ?? '';
  if (dataDir === '') bad('dataDir', 'is required');
  const address = (
    key: 'listen' | 'peerListen' | 'metricsListen' | 'debugListen' | 'httpListen',
    fallback: string,
  ): HostPort => {
    const parsed = parseHostPort(options[key] ?? fallback);
    if (typeof parsed === 'string') {
      bad(key, parsed);
      return { host: '127.0.0.1', port: 0 };
    }
    return parsed;
  };
  const listen = address('listen', '127.0.0.1:7001');
  const peerListen = address('peerListen', '127.0.0.1:7101');
  if (listen.host === peerListen.host && listen.port === peerListen.port && listen.port !== 0) {
    bad('peerListen', 'must differ from --listen');
  }
  const metricsListen =
    options.metricsListen === undefined || options.metricsListen === ''
      ? undefined
      : address('metricsListen', '');
  checkMetricsDistinct(metricsListen, listen, peerListen, bad);
  const debugListen =
    options.debugListen === undefined || options.debugListen === ''
      ? undefined
      : address('debugListen', '');
  checkDebugDistinct(debugListen, { listen, peerListen, metricsListen }, bad);
  const httpListen =
    options.httpListen === undefined || options.httpListen === ''
      ? undefined
      : address('httpListen', '');
  checkHttpDistinct(httpListen, { listen, peerListen, metricsListen, debugListen }, bad);
  const otlpEndpoint = parseOtlpEndpoint(options.otlpEndpoint, bad);
  const targetPolicy = parseAllowTarget(options.allowTarget, bad);
  const advertiseAddress = parseAdvertised(options.advertiseAddress, bad);
  const initialCluster = parseInitialCluster(options.initialCluster, id, bad);
  const join = parseJoin(options.join, initialCluster !== undefined, bad);
  const peerRoutes = parsePeerRoutes(options.peerRoute, id, bad);
  const { adminTokenFile, insecureNoAuth } = checkAuthOptions(options, bad);
  const apiTls = parseApiTls(options, bad);
  const peerTls = parsePeerTls(options, bad);
  const int = (key: keyof NodeOptions, value: number, min: number, max: number): number => {
    if (!Number.isSafeInteger(value) || value < min || value > max) {
      bad(key, `must be an integer in [${min}, ${max}], got ${value}`);
    }
    return value;
  };
  const groups = int('groups', options.groups ?? 16, 1, 4096);
  const tickMs = int('tickMs', options.tickMs ?? 50, 1, 10_000);
  const electionTicks = int('electionTicks', options.electionTicks ?? 10, 2, 1000);
  const heartbeatTicks = int('heartbeatTicks', options.heartbeatTicks ?? 2, 1, 1000);
  if (heartbeatTicks >= electionTicks) bad('heartbeatTicks', 'must be less than --election-ticks');
  const snapshotEveryBytes = int(
    'snapshotBytes',
    options.snapshotBytes ?? 64 * 1024 * 1024,
    1024,
    2 ** 40,
  );
  const logTailBytesMax = int(
    'logTailBytes',
    options.logTailBytes ?? LOG_TAIL_BYTES_MAX_DEFAULT,
    0,
    2 ** 40,
  );
  const quiesceTicks = int('quiesceTicks', options.quiesceTicks ?? 20, 0, 1_000_000);
  const snapshotEveryEntries = int(
    'snapshotEntries',
    options.snapshotEntries ?? 10_000,
    10,
    10_000_000,
  );
  const shutdownTimeoutMs = int('shutdownTimeoutMs', options.shutdownTimeoutMs ?? 5000, 0, 600_000);
  const lookAheadMs = int('lookAheadMs', options.lookAheadMs ?? 3000, 100, 600_000);
  const misfireThresholdMs = int(
    'misfireThresholdMs',
    options.misfireThresholdMs ?? 5000,
    0,
    86_400_000,
  );
  const resultHoldMs = int('resultHoldMs', options.resultHoldMs ?? 2000, 0, 10_000);
  const splitJobs = int('splitJobs', options.splitJobs ?? 1_000_000, 0, 1_000_000_000);
  const splitFireRate = checkSplitFireRate(options.splitFireRate ?? 0, bad);
  const connectionsPerOrigin = int(
    'webhookConnections',
    options.webhookConnections ?? DEFAULT_WEBHOOK_CONNECTIONS,
    1,
    4096,
  );
  // By default an origin has no more attempts in flight than connections: the rest wait in the
  // fair queue, where priority and tenant order still apply and no attempt deadline runs yet,
  // rather than in the HTTP pool's own queue (and the pool's hand-over costs CPU per request).
  const originInflightMax = int(
    'originInflight',
    options.originInflight ?? connectionsPerOrigin,
    1,
    1_000_000,
  );
  const tenantInflightMax = int('tenantInflight', options.tenantInflight ?? 4096, 1, 1_000_000);
  const queuedMax = int('deliveryQueue', options.deliveryQueue ?? 200_000, 1, 10_000_000);
  const { runOutputMaxBytes, runOutputStoreBytes } = runOutputBounds(options, int);
  const metricsTenants = int(
    'metricsTenants',
    options.metricsTenants ?? DEFAULT_METRICS_TENANTS,
    0,
    TENANT_LABELS_MAX,
  );
  if (violations.length > 0) throw new ValidationError('CONFIG_INVALID', violations);
  return Object.freeze({
    id,
    dataDir,
    listen,
    advertiseAddress,
    peerListen,
    initialCluster,
    groups,
    tickMs,
    raft: compileRaftOptions({
      electionTimeoutTicks: electionTicks,
      // Timers spread over half an election timeout rather than a whole one: a dead leader is
      // replaced within 1.5 election timeouts (not 2) plus the election. With pre-vote and
      // three replicas a split vote stays rare, and the lease does not depend on the spread.
      electionJitterTicks: Math.max(1, Math.ceil(electionTicks / 2)),
      heartbeatTicks,
      quiesceAfterTicks: quiesceTicks,
    }),
    snapshotEveryEntries,
    snapshotEveryBytes,
    logTailBytesMax,
    shutdownTimeoutMs,
    splitJobs,
    splitFireRate,
    scheduler: { lookAheadMs, misfireThresholdMs, resultHoldMs },
    delivery: {
      connectionsPerOrigin,
      originInflightMax,
      tenantInflightMax,
      queuedMax,
      targetPolicy,
      runOutputMaxBytes,
      runOutputStoreBytes,
    },
    metricsListen,
    httpListen,
    otlpEndpoint,
    metricsTenants,
    debugListen,
    join,
    peerRoutes,
    adminTokenFile,
    insecureNoAuth,
    apiTls,
    peerTls,
  });
}

/** --run-output-max-bytes and --run-output-store-bytes (src/delivery/run-output-store.ts). */
function runOutputBounds(
  options: NodeOptions,
  int: (key: keyof NodeOptions, value: number, min: number, max: number) => number,
): { runOutputMaxBytes: number; runOutputStoreBytes: number } {
  const runOutputMaxBytes = int(
    'runOutputMaxBytes',
    options.runOutputMaxBytes ?? RUN_OUTPUT_MAX_BYTES_DEFAULT,
    0,
    RUN_OUTPUT_MAX_BYTES_LIMIT,
  );
  // The store holds at least one whole output (and its entry's overhead).
  const runOutputStoreBytes = int(
    'runOutputStoreBytes',
    options.runOutputStoreBytes ?? RUN_OUTPUT_STORE_BYTES_DEFAULT,
    runOutputMaxBytes === 0 ? 0 : runOutputMaxBytes + RUN_OUTPUT_ENTRY_OVERHEAD_BYTES,
    2 ** 40,
  );
  return { runOutputMaxBytes, runOutputStoreBytes };
}

/** Exactly one of --admin-token-file and --insecure-no-auth. */
function checkAuthOptions(
  options: NodeOptions,
  bad: (key: keyof NodeOptions, reason: string) => void,
): { adminTokenFile: string | undefined; insecureNoAuth: boolean } {
  const file = options.adminTokenFile;
  const insecure = options.insecureNoAuth;
  if (insecure !== undefined && typeof insecure !== 'boolean') {
    bad('insecureNoAuth', `must be true or false, got ${JSON.stringify(insecure)}`);
    return { adminTokenFile: undefined, insecureNoAuth: false };
  }
  if (file !== undefined && (typeof file !== 'string' || file === '')) {
    bad('adminTokenFile', 'must name a file');
    return { adminTokenFile: undefined, insecureNoAuth: false };
  }
  if (insecure === true && file !== undefined) {
    bad('insecureNoAuth', 'cannot be given with --admin-token-file');
    return { adminTokenFile: undefined, insecureNoAuth: false };
  }
  if (insecure !== true && file === undefined) {
    bad(
      'adminTokenFile',
      'is required: a file holding the cluster admin token, the same on every node ' +
        '(or --insecure-no-auth to serve every call unauthenticated, for loopback development only)',
    );
    return { adminTokenFile: undefined, insecureNoAuth: false };
  }
  return { adminTokenFile: file, insecureNoAuth: insecure === true };
}

type TlsKey =
  'tlsCert' | 'tlsKey' | 'tlsClientCa' | 'tlsCa' | 'peerTlsCert' | 'peerTlsKey' | 'peerTlsCa';

/** A TLS file option: undefined when not given; '' is refused (a file must be named). */
function tlsFile(
  options: NodeOptions,
  key: TlsKey,
  bad: (key: keyof NodeOptions, reason: string) => void,
): string | undefined {
  const v = options[key];
  if (v === undefined) return undefined;
  if (v === '') bad(key, 'must name a PEM file');
  return v === '' ? undefined : v;
}

/**
 * The client API's TLS flags: --tls-cert and --tls-key go together; --tls-client-ca and --tls-ca
 * only mean something over TLS. The files themselves are read by src/config/tls-files.ts.
 */
function parseApiTls(
  options: NodeOptions,
  bad: (key: keyof NodeOptions, reason: string) => void,
): ApiTlsFiles | undefined {
  const certFile = tlsFile(options, 'tlsCert', bad);
  const keyFile = tlsFile(options, 'tlsKey', bad);
  const clientCaFile = tlsFile(options, 'tlsClientCa', bad);
  const caFile = tlsFile(options, 'tlsCa', bad);
  if (keyFile !== undefined && certFile === undefined)
    bad('tlsCert', 'is required with --tls-key (the certificate the key belongs to)');
  if (certFile !== undefined && keyFile === undefined)
    bad('tlsKey', 'is required with --tls-cert (the private key of the certificate)');
  if (certFile === undefined && keyFile === undefined) {
    const needs = 'needs --tls-cert and --tls-key: the client API is plaintext without them';
    if (clientCaFile !== undefined) bad('tlsClientCa', needs);
    if (caFile !== undefined) bad('tlsCa', needs);
    return undefined;
  }
  if (certFile === undefined || keyFile === undefined) return undefined;
  return { certFile, keyFile, clientCaFile, caFile };
}

/** The peer transport's three TLS flags: all or none; each one missing is named. */
function parsePeerTls(
  options: NodeOptions,
  bad: (key: keyof NodeOptions, reason: string) => void,
): PeerTlsFiles | undefined {
  const keys = ['peerTlsCert', 'peerTlsKey', 'peerTlsCa'] as const;
  const given = keys.filter((k) => options[k] !== undefined);
  const files = keys.map((k) => tlsFile(options, k, bad));
  if (given.length === 0) return undefined;
  if (given.length < keys.length) {
    const with_ = given.map((k) => OPTION_FLAGS[k]).join(' and ');
    for (const k of keys)
      if (!given.includes(k))
        bad(
          k,
          `is required with ${with_}: mutual TLS between nodes needs the node's certificate, its key and the cluster's CA`,
        );
    return undefined;
  }
  const [certFile, keyFile, caFile] = files;
  if (certFile === undefined || keyFile === undefined || caFile === undefined) return undefined;
  return { certFile, keyFile, caFile };
}

/** Fires per second, fractions allowed (a group of every-minute jobs fires below 1/s). */
function checkSplitFireRate(
  rate: number,
  bad: (key: keyof NodeOptions, reason: string) => void,
): number {
  if (!Number.isFinite(rate) || rate < 0 || rate > 1_000_000)
    bad('splitFireRate', `must be a number of fires/s in [0, 1000000], got ${rate}`);
  return rate;
}

/**
 * An advertised address is dialled by clients, so it must be one they can dial: not a wildcard
 * (which only means "every interface" to a listener) and not port 0 (which only means "any free
 * port" to a listener).
 */
function parseAdvertised(
  text: string | undefined,
  bad: (key: keyof NodeOptions, reason: string) => void,
): HostPort | undefined {
  if (text === undefined) return undefined;
  const hp = parseHostPort(text);
  if (typeof hp === 'string') bad('advertiseAddress', hp);
  else if (hp.host === '0.0.0.0' || /^\[[0:]*\]$/.test(hp.host))
    bad('advertiseAddress', `must be an address clients can dial, not the wildcard ${hp.host}`);
  else if (hp.port === 0) bad('advertiseAddress', 'must name a port, not 0');
  else return hp;
  return undefined;
}

/** The metrics port may not be one of the node's other ports (port 0 picks a free one). */
function checkMetricsDistinct(
  metrics: HostPort | undefined,
  listen: HostPort,
  peerListen: HostPort,
  bad: (key: keyof NodeOptions, reason: string) => void,
): void {
  if (metrics === undefined || metrics.port === 0) return;
  for (const [flag, hp] of [
    ['--listen', listen],
    ['--peer-listen', peerListen],
  ] as const) {
    if (hp.host === metrics.host && hp.port === metrics.port)
      bad('metricsListen', `must differ from ${flag}`);
  }
}

/** The DebugService port may not be one of the node's other ports (port 0 picks a free one). */
function checkDebugDistinct(
  debug: HostPort | undefined,
  others: { listen: HostPort; peerListen: HostPort; metricsListen: HostPort | undefined },
  bad: (key: keyof NodeOptions, reason: string) => void,
): void {
  if (debug === undefined || debug.port === 0) return;
  for (const [key, hp] of Object.entries(others) as [keyof NodeOptions, HostPort | undefined][]) {
    if (hp !== undefined && hp.host === debug.host && hp.port === debug.port)
      bad('debugListen', `must differ from ${OPTION_FLAGS[key]}`);
  }
}

/** The HTTP/JSON API's port may not be one of the node's other ports (port 0 picks a free one). */
function checkHttpDistinct(
  http: HostPort | undefined,
  others: {
    listen: HostPort;
    peerListen: HostPort;
    metricsListen: HostPort | undefined;
    debugListen: HostPort | undefined;
  },
  bad: (key: keyof NodeOptions, reason: string) => void,
): void {
  if (http === undefined || http.port === 0) return;
  for (const [key, hp] of Object.entries(others) as [keyof NodeOptions, HostPort | undefined][]) {
    if (hp !== undefined && hp.host === http.host && hp.port === http.port)
      bad('httpListen', `must differ from ${OPTION_FLAGS[key]}`);
  }
}

/**
 * `--allow-target` (repeated flags arrive joined by commas) or the config's `allowTarget` (a
 * string or a list of strings): every bad range is named with its value.
 */
function parseAllowTarget(
  value: unknown,
  bad: (key: keyof NodeOptions, reason: string) => void,
): TargetPolicy {
  if (value === undefined || value === null) return TargetPolicy.STRICT;
  const entries = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(entries) || !entries.every((e): e is string => typeof e === 'string')) {
    bad('allowTarget', 'must be a CIDR range, a comma list of them, or a list of them');
    return TargetPolicy.STRICT;
  }
  if (entries.length === 0) return TargetPolicy.STRICT;
  const parsed = parseCidrList(entries);
  if (!parsed.ok) {
    for (const reason of parsed.reasons) bad('allowTarget', reason);
    return TargetPolicy.STRICT;
  }
  return new TargetPolicy(parsed.ranges);
}

function parseJoin(
  text: string | undefined,
  hasInitialCluster: boolean,
  bad: (key: keyof NodeOptions, reason: string) => void,
): string | undefined {
  if (text === undefined || text === '') return undefined;
  if (hasInitialCluster) bad('join', 'cannot be combined with --initial-cluster');
  const hp = parseHostPort(text);
  if (typeof hp !== 'string') return formatHostPort(hp);
  bad('join', hp);
  return undefined;
}

/** `id=host:port,…` into a map; each bad entry is reported against `key`. */
function parseIdAddressList(
  key: 'initialCluster' | 'peerRoute',
  text: string,
  bad: (key: keyof NodeOptions, reason: string) => void,
): Map<NodeId, string> {
  const entries = new Map<NodeId, string>();
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    const id = eq > 0 ? part.slice(0, eq) : '';
    const addr = eq > 0 ? part.slice(eq + 1) : '';
    if (!ID_PATTERN.test(id)) {
      bad(key, `entry '${part}' must be id=host:port`);
      continue;
    }
    const hp = parseHostPort(addr);
    if (typeof hp === 'string') {
      bad(key, `entry '${part}': address ${hp}`);
      continue;
    }
    if (entries.has(id)) bad(key, `node ${id} is listed twice`);
    entries.set(id, addr);
  }
  return entries;
}

function parseInitialCluster(
  text: string | undefined,
  selfId: string,
  bad: (key: keyof NodeOptions, reason: string) => void,
): Map<NodeId, string> | undefined {
  if (text === undefined || text === '') return undefined;
  const members = parseIdAddressList('initialCluster', text, bad);
  if (selfId !== '' && members.size > 0 && !members.has(selfId)) {
    bad('initialCluster', `must include this node (${selfId})`);
  }
  return members;
}

function parsePeerRoutes(
  text: string | undefined,
  selfId: string,
  bad: (key: keyof NodeOptions, reason: string) => void,
): ReadonlyMap<NodeId, string> {
  if (text === undefined || text === '') return new Map();
  const routes = parseIdAddressList('peerRoute', text, bad);
  if (routes.has(selfId))
    bad('peerRoute', `names this node (${selfId}); a node never dials itself`);
  return routes;
}

/** An http(s) URL without credentials, or undefined when not given. */
function parseOtlpEndpoint(
  text: string | undefined,
  bad: (key: keyof NodeOptions, reason: string) => void,
): string | undefined {
  if (text === undefined || text === '') return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    bad('otlpEndpoint', `'${text}' is not a URL (e.g. http://127.0.0.1:4318)`);
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    bad('otlpEndpoint', 'must be an http:// or https:// URL');
  else if (url.username !== '' || url.password !== '')
    bad('otlpEndpoint', 'must not hold credentials');
  return text;
}
