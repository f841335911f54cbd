/**
 * The composition root of `tickraft serve`: the only place that wires real I/O together.
 * Opens the node's LevelDB, creates the groups of a new cluster (or reopens those on disk),
 * starts the peer transport and the loop, initializes the meta group, nudges each group's
 * preferred leader to campaign, and on shutdown hands leaderships over before it stops.
 */
import { DEFAULT_RUN_RETENTION } from '../placement/run-retention.js';
import { SystemClock } from '../base/clock.js';
import { SeededRand } from '../base/rand.js';
import type { CompiledNodeConfig } from '../config/node-config.js';
import { formatHostPort } from '../config/node-config.js';
import type { GroupReplica } from '../multiraft/group-replica.js';
import { MultiRaftHost } from '../multiraft/host.js';
import { planBootstrap, META_GROUP_ID, type BootstrapPlan } from '../placement/bootstrap-plan.js';
import { encodeMetaCommand, MetaStateMachine } from '../placement/meta-state.js';
import { NodeStore } from '../storage/node-store.js';
import { PeerTransport } from '../transport/peer-transport.js';
import type { NodeId } from '../raft/messages.js';
import { DeliveryRunner, type DeliveryRunnerStats } from '../delivery/delivery-runner.js';
import { WorkerHub } from '../delivery/worker-hub.js';
import { RunOutputStore } from '../delivery/run-output-store.js';
import { OriginPools } from '../delivery/origin-pools.js';
import type { KvStateMachine } from './kv-state-machine.js';
import { DataGroupStateMachine } from './data-group-state-machine.js';
import { NO_TRACING, type Tracing } from '../observe/tracing.js';
import { SchedulerRuntime } from './scheduler-runtime.js';
import { DEFAULT_TENANT_INFLIGHT_MAX, signingSecretsAt } from '../api/tenant-admin.js';
import { DEFAULT_TENANT_LIMITS, nodeShareOf } from '../placement/tenant-limits.js';
import { NO_NODE } from '../raft/messages.js';
import { NodeMetrics, type SchedulerGroupFacts } from '../observe/metrics.js';
import { OpsHttpServer, type Readiness } from '../observe/http-server.js';
import { joinCluster, rejoinInBackground } from './join.js';
import { MembershipRuntime } from './membership-runtime.js';
import type { NodeTls } from '../config/tls-files.js';
import {
  channelCredentials,
  PEER_TLS_UNVERIFIED,
  PeerTlsError,
  probeTls,
} from '../transport/tls.js';
import type { RefusedPeer } from '../transport/tls-listener.js';
import type { ChannelCredentials } from '@grpc/grpc-js';
import { GcPauseRecorder } from '../observe/gc-pauses.js';
import { LoopStallWatch } from '../observe/loop-stalls.js';
import { RoleChanges, type RoleChange } from '../observe/role-changes.js';

/** Leader balancing leaves a group with a new leader for this long (TickraftNode.balanceLeaders). */
const LEADER_SETTLE_MS = 1000;
/** Bound on AddNode's TLS handshake with a joining node's peer address. */
const JOIN_PROBE_MS = 5000;
/** A peer that keeps failing to connect is logged again after this long (one line, not one per retry). */
const CONNECT_FAILED_LOG_EVERY_MS = 30_000;

export interface NodeLogger {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  error(fields: Record<string, unknown>, msg: string): void;
}

export class TickraftNode {
  readonly meta = new MetaStateMachine();
  /** The data groups' state machines hosted here (scheduler and test key-value state). */
  readonly data = new Map<number, DataGroupStateMachine>();
  host!: MultiRaftHost;
  scheduler!: SchedulerRuntime;
  private pools!: OriginPools;
  private runner!: DeliveryRunner;
  /** Pull-based workers' streams on this node, and the runs leased to them (docs/API.md). */
  readonly workers: WorkerHub;
  /**
   * Runs' full outputs this node received (webhook answers it read, workers' output on leases it
   * held, CompleteRun outputs it served), in memory beside the log: lost with the process.
   */
  readonly runOutputs: RunOutputStore;
  private store!: NodeStore;
  private transport!: PeerTransport;
  private plan: BootstrapPlan | undefined;
  /** The bootstrap plan's first replica of each of its groups: leader balancing's default. */
  private readonly plannedLeaders = new Map<number, NodeId>();
  private metaInitProposed = false;
  private campaignTimer: NodeJS.Timeout | undefined;
  private fatal: ((err: unknown) => void) | undefined;
  /** Leader balancing's hand-overs, by `group>preferred node` (a bounded number of tries). */
  private readonly balanceAttempts = new Map<string, { count: number; atMs: number }>();
  /** Groups whose balancing hand-over waits for a meta ReadIndex. */
  private readonly balanceReading = new Set<number>();
  private stopping = false;
  private shutdownOnce: Promise<{ transferred: number; remaining: number }> | undefined;
  metrics!: NodeMetrics;
  private ops: OpsHttpServer | undefined;
  /** The port /metrics is served on (after start), when --metrics-listen is given. */
  metricsPort: number | undefined;
  /** The leader last seen per group, to count and log leader changes. */
  private readonly leaderSeen = new Map<number, NodeId>();
  private readonly roleChanges = new RoleChanges();
  /** When this node last became the leader of a group (Date.now()). */
  private readonly ledSinceMs = new Map<number, number>();
  /** Peer addresses a join answered with (before the meta group reaches this node). */
  private joinPeers = new Map<NodeId, string>();
  membership!: MembershipRuntime;
  /** Forwarding's TLS to other nodes' client APIs (ApiNode); undefined: plaintext. */
  readonly apiDialCredentials: ChannelCredentials | undefined;
  /** When a connect failure to each peer was last logged. */
  private readonly connectFailLoggedMs = new Map<NodeId, number>();

  /**
   * OpenTelemetry tracing (--otlp-endpoint); NO_TRACING when off. Set before start(): the
   * delivery runner and the scheduler read it when they are made.
   */
  tracing: Tracing = NO_TRACING;

  /** This process's garbage-collection pauses (recorded from start()). */
  readonly gcPauses = new GcPauseRecorder();
  /**
   * Where start-up time went, ms: opening the store (LevelDB and the log tails), opening the
   * groups (snapshots restored), and the moment start() finished, from the process's start
   * (performance.now()). 0 until reached.
   */
  readonly startup = { storeOpenMs: 0, groupsOpenMs: 0, startedMs: 0 };

  constructor(
    readonly config: CompiledNodeConfig,
    private readonly log: NodeLogger,
    /** The TLS material (src/config/tls-files.ts); none: every listener is plaintext. */
    private readonly tls: NodeTls = { api: undefined, peer: undefined },
    /** The bootstrap admin token this node joins with; undefined without authentication. */
    private readonly adminToken: string | undefined = undefined,
  ) {
    this.apiDialCredentials = tls.api && channelCredentials(tls.api.dial);
    this.runOutputs = new RunOutputStore({
      maxBytes: config.delivery.runOutputMaxBytes,
      storeBytes: config.delivery.runOutputStoreBytes,
    });
    this.workers = new WorkerHub({ outputs: this.runOutputs });
  }

  /** ApiNode: with peer mutual TLS, a joining node must prove a certificate of the cluster's CA. */
  async verifyJoiningPeer(peerAddress: string): Promise<void> {
    const peer = this.tls.peer;
    if (peer === undefined) return;
    try {
      await probeTls(peerAddress, peer.material, JOIN_PROBE_MS);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.log.warn({ peerAddress, reason }, 'join refused: peer certificate not verified');
      throw new PeerTlsError(
        PEER_TLS_UNVERIFIED,
        `the node at peer address ${peerAddress} did not prove a certificate signed by this ` +
          `cluster's --peer-tls-ca (${reason}); a node joins only while it serves its peer ` +
          `address with such a certificate (start it with --join)`,
        { cause: err },
      );
    }
  }

  get id(): NodeId {
    return this.config.id;
  }

  /**
   * Resolves once the node serves; rejects on a bad data directory or an unusable address, after
   * releasing everything it had opened (listeners, the store and its lock, timers), so a node
   * that cannot start exits instead of running without one of its listeners.
   *
   * Every listener is bound before the node creates or joins a cluster and before its groups
   * start ticking: a taken port then costs nothing but the store being opened and closed again.
   * `bindApi` binds the client API (the caller owns that server, and closes it when this rejects).
   */
  async start(onFatal: (err: unknown) => void, bindApi?: () => Promise<unknown>): Promise<void> {
    this.fatal = onFatal;
    try {
      await this.startSteps(bindApi);
    } catch (err) {
      await this.releaseStart();
      throw err;
    }
  }

  /** What start() opened so far, in opening order; releaseStart() closes it in reverse. */
  private readonly startOpened: { what: string; close: () => Promise<void> | void }[] = [];

  /** Undoes a start that failed half-way; a close that fails is logged, the others still run. */
  private async releaseStart(): Promise<void> {
    if (this.campaignTimer) clearTimeout(this.campaignTimer);
    for (const { what, close } of this.startOpened.splice(0).reverse()) {
      try {
        await close();
      } catch (err) {
        this.log.warn({ what, err: String(err) }, 'failed start: closing failed');
      }
    }
  }

  private async startSteps(bindApi: (() => Promise<unknown>) | undefined): Promise<void> {
    const cfg = this.config;
    this.gcPauses.start();
    this.startOpened.push({ what: 'gc pause recorder', close: () => this.gcPauses.stop() });
    // Half an election timeout: a node held this long can cost a group its leader.
    const heldMs = Math.max(1, (cfg.tickMs * cfg.raft.electionTimeoutTicks) / 2);
    const t0 = performance.now();
    this.store = await NodeStore.open(cfg.dataDir, { logTailBytesMax: cfg.logTailBytesMax });
    this.startup.storeOpenMs = performance.now() - t0;
    const store = this.store;
    this.startOpened.push({ what: 'store', close: () => store.close() });
    // Seeded from the node id and the clock: election jitter only needs to differ across nodes.
    const rand = new SeededRand(hashString(cfg.id) ^ (Date.now() & 0xffffffff));
    this.host = new MultiRaftHost({
      nodeId: cfg.id,
      store: this.store,
      clock: SystemClock,
      rand,
      raft: cfg.raft,
      // The meta group stays awake: its traffic is the cluster's pulse and it must fail over fast.
      raftFor: (groupId) =>
        groupId === META_GROUP_ID ? { ...cfg.raft, quiesceAfterTicks: 0 } : cfg.raft,
      tickMs: cfg.tickMs,
      snapshotEveryEntries: cfg.snapshotEveryEntries,
      snapshotEveryBytes: cfg.snapshotEveryBytes,
      makeStateMachine: (groupId) => {
        if (groupId === META_GROUP_ID) return this.meta;
        const sm = new DataGroupStateMachine();
        this.data.set(groupId, sm);
        // The scheduler exists before the first group opens (openGroups below).
        if (this.scheduler !== undefined) this.scheduler.attach(groupId, sm);
        return sm;
      },
      onFatal: (err) => this.die(err),
      slowTurnMs: heldMs,
      // Half a tick: the tick interval, and with it the beats of a held loop, runs in between.
      applySliceMs: Math.max(1, cfg.tickMs / 2),
      yieldToLoop: () => new Promise<void>((resolve) => setImmediate(resolve)),
    });
    this.metrics = this.makeMetrics();
    this.watchHeldLoop(heldMs);
    this.makeDelivery();
    this.scheduler = this.makeScheduler(rand);
    const { runner, workers, pools } = this;
    this.startOpened.push({
      what: 'delivery',
      close: async () => {
        runner.close();
        workers.close();
        await pools.destroy();
      },
    });
    const host = this.host;
    // The loop may run turns before start() (groups created by a bootstrap or a join).
    this.startOpened.push({ what: 'raft loop', close: () => host.stop() });
    const t1 = performance.now();
    // Each data group joins the scheduler as its replica is made (makeStateMachine above),
    // before its snapshot is restored: the restore rebuilds that dispatcher's indexes once.
    host.openGroups();
    this.startup.groupsOpenMs = performance.now() - t1;
    const transport = this.makeTransport();
    this.transport = transport;
    // Closed even when the bind failed: close() waits for the bind to settle (no port left open).
    this.startOpened.push({ what: 'peer transport', close: () => transport.close() });
    await transport.start();
    // The loop runs turns for groups created below (bootstrap, join) before start(); they send.
    this.host.transport = transport;
    await this.startOps();
    await bindApi?.();
    const fresh = await this.openOrCreate();
    // The peers a join answered with, unless --peer-route says where to dial them.
    for (const [id, addr] of this.joinPeers)
      if (id !== cfg.id && !cfg.peerRoutes.has(id)) transport.setPeer(id, addr);
    this.wireMembership();
    this.host.afterTurn = () => this.afterTurn();
    this.host.start();
    this.scheduler.start();
    this.startup.startedMs = performance.now();
    const scheduler = this.scheduler;
    this.startOpened.push({ what: 'scheduler', close: () => scheduler.stop() });
    // Preferred leaders campaign once the startup quiet period is over, so leadership starts
    // balanced; anyone else would time out later and only then campaign.
    const quietMs = (cfg.raft.electionTimeoutTicks + 1) * cfg.tickMs;
    this.campaignTimer = setTimeout(() => this.campaignPreferred(), quietMs);
    // A joined node restarting: its join's answer may have been lost; ask again.
    if (!fresh && cfg.join) rejoinInBackground(this.joinRequest(cfg.join), this.log);
    this.log.info(
      {
        groups: this.host.groups.size,
        fresh,
        peerListen: formatHostPort(cfg.peerListen),
        metricsListen: cfg.metricsListen && `${cfg.metricsListen.host}:${this.metricsPort ?? 0}`,
      },
      'node started',
    );
  }

  /** The webhook pools and the delivery runner (nothing opened until a delivery starts). */
  private makeDelivery(): void {
    const cfg = this.config;
    this.pools = new OriginPools({
      connectionsPerOrigin: cfg.delivery.connectionsPerOrigin,
      targetPolicy: cfg.delivery.targetPolicy,
    });
    this.runner = new DeliveryRunner({
      pools: this.pools,
      queue: {
        queuedMax: cfg.delivery.queuedMax,
        tenantInflightMax: cfg.delivery.tenantInflightMax,
        originInflightMax: cfg.delivery.originInflightMax,
      },
      secretsOf: (tenant) => {
        const t = this.meta.tenants.get(tenant);
        // After a rotation's grace period only the current secret signs.
        return t && signingSecretsAt(t, Date.now());
      },
      weightOf: (tenant) => this.meta.tenants.get(tenant)?.priorityWeight ?? 1,
      ...(this.tracing.enabled && {
        traceparentOf: (fireId: string, attempt: number) =>
          this.tracing.traceparentOf(fireId, attempt),
      }),
      inflightMaxOf: (tenant) =>
        this.shareOfLimit(
          this.meta.tenants.get(tenant)?.inflightMax ?? DEFAULT_TENANT_INFLIGHT_MAX,
        ),
      mayStart: (owner, request) => this.scheduler.mayStart(owner, request),
      workers: this.workers,
      limits: { outputBytes: cfg.delivery.runOutputMaxBytes },
    });
  }

  private makeScheduler(rand: SeededRand): SchedulerRuntime {
    const cfg = this.config;
    return new SchedulerRuntime({
      host: this.host,
      runner: this.runner,
      clock: SystemClock,
      rand: rand.fork(),
      drainMaxMs: Math.max(1000, cfg.shutdownTimeoutMs - 1000),
      // As the host's apply slices: half a tick, well inside half an election timeout.
      stepSliceMs: Math.max(1, cfg.tickMs / 2),
      // Two election timeouts to notice a dead leader, plus as much again for the election and
      // the new leader's first commit, before a quiet group's next due work.
      dueWakeLeadMs: 4 * cfg.raft.electionTimeoutTicks * cfg.tickMs,
      dispatcher: {
        nodeId: this.id,
        lookAheadMs: cfg.scheduler.lookAheadMs,
        misfireThresholdMs: cfg.scheduler.misfireThresholdMs,
        resultHoldMs: cfg.scheduler.resultHoldMs,
        retentionOf: (tenant) => this.meta.tenants.get(tenant)?.retention ?? DEFAULT_RUN_RETENTION,
      },
      onError: (err) => this.die(err),
      observer: this.metrics,
      tracing: this.tracing,
      runOutputs: this.runOutputs,
      fireRateOf: (tenant) =>
        this.shareOfLimit(
          (this.meta.tenants.get(tenant)?.limits ?? DEFAULT_TENANT_LIMITS).firesPerSecond,
        ),
    });
  }

  tenantDeliveries(tenant: string): {
    queued: number;
    inflight: number;
    fired: number;
    throttled: number;
  } {
    const q = this.runner.tenantCounts(tenant);
    const f = this.scheduler.tenantFires(tenant);
    return {
      queued: q.queuedCount,
      inflight: q.inflightCount,
      fired: f.fired,
      throttled: f.throttled,
    };
  }

  /** Data groups this node led at the last loop turn (observeLeaders counts them). */
  private dataGroupsLed = 0;

  /**
   * This node's part of a tenant's cluster-wide limit, by the data groups it leads
   * (nodeShareOf). Asked per attempt: it reads counts, never walks the groups.
   */
  private shareOfLimit(limit: number): number {
    return nodeShareOf(limit, this.dataGroupsLed, this.meta.groups.size);
  }

  /** The peer transport, dialing the peers known so far (more come from a join and meta). */
  private makeTransport(): PeerTransport {
    const cfg = this.config;
    return new PeerTransport({
      nodeId: cfg.id,
      listen: formatHostPort(cfg.peerListen),
      peers: this.initialPeers(),
      onMessages: (from, msgs) => this.host.deliver(from, msgs),
      onSnapshotStatus: (groupId, to, ok) =>
        this.host.report(groupId, { kind: 'snapshot-status', to, ok }),
      onUnreachable: (to, groupIds) => {
        for (const g of groupIds) this.host.report(g, { kind: 'unreachable', to });
      },
      isGroupHosted: (groupId) => this.host.isHosted(groupId),
      ...(this.tls.peer !== undefined ? { tls: this.tls.peer } : {}),
      onRefused: (peer) => this.peerRefused(peer),
      onConnectFailed: (peer, reason) => this.peerConnectFailed(peer, reason),
      onPeerStream: (peer) => this.host.wakeGroupsLedWith(peer),
      onPeerStreamEnded: (peer) => this.host.wakeGroupsLedBy(peer),
    });
  }

  /** Mutual TLS refused a connection to the peer port: say who and why, and count it. */
  private peerRefused(peer: RefusedPeer): void {
    this.metrics.peerConnectionRefused(peer.reason);
    this.log.warn(
      {
        remote: peer.remote,
        reason: peer.reason,
        detail: peer.detail,
        subject: peer.subject,
        issuer: peer.issuer,
      },
      peer.kind === 'certificate'
        ? "peer connection refused: its certificate is not signed by this cluster's --peer-tls-ca"
        : 'peer connection failed in its TLS handshake (the other end refused this node, or spoke no TLS)',
    );
  }

  /**
   * A stream to a peer failed before it was accepted (down, unreachable, or TLS refused: the
   * reason says which); logged at most once per peer and interval, as it retries with backoff.
   */
  private peerConnectFailed(peer: NodeId, reason: string): void {
    const now = Date.now();
    const last = this.connectFailLoggedMs.get(peer);
    if (last !== undefined && now - last < CONNECT_FAILED_LOG_EVERY_MS) return;
    this.connectFailLoggedMs.set(peer, now);
    this.log.warn({ peer, reason }, 'cannot connect to peer');
  }

  private makeMetrics(): NodeMetrics {
    const metrics = new NodeMetrics(
      {
        host: this.host,
        schedulerGroups: () => this.schedulerFacts(),
        deliveryQueued: () => this.runner.queuedCount,
        deliveryInflight: () => this.runner.inflightCount,
        workersConnected: () => this.workers.workerCounts(),
        workerLeases: () => ({ held: this.workers.heldCount, waiting: this.workers.waitingCount }),
        workerLeasesLost: () => ({
          notRenewed: this.workers.stats.expired,
          disconnected: this.workers.stats.disconnected,
        }),
        tenantDeliveries: (tenant) => this.tenantDeliveries(tenant),
        tenantQueueAgesMs: () => this.runner.oldestQueuedAgeMs(),
        deadRunsByTenant: () => this.deadRunsByTenant(),
      },
      this.config.id,
      { tenantLabels: this.config.metricsTenants },
    );
    this.host.onCommit = (s) => metrics.commitDone(s);
    return metrics;
  }

  /** The /metrics, /healthz and /readyz server, when --metrics-listen asks for it. */
  private async startOps(): Promise<void> {
    const at = this.config.metricsListen;
    if (!at) return;
    this.ops = new OpsHttpServer({
      render: () => this.metrics.render(),
      readiness: () => this.readiness(),
    });
    const ops = this.ops;
    this.startOpened.push({ what: 'metrics listener', close: () => ops.close() });
    this.metricsPort = await ops.start(at.host, at.port, this.tls.api?.server);
  }

  /**
   * Ready: the meta group is initialized (routing works) and every group hosted here knows its
   * leader (proposals can be served or forwarded). Not ready while stopping.
   */
  readiness(): Readiness {
    if (this.stopping) return { ready: false, reason: 'stopping' };
    if (!this.meta.initialized) return { ready: false, reason: 'meta group not initialized' };
    const leaderless: number[] = [];
    for (const g of this.host.groups.values())
      if (g.leaderId === NO_NODE) leaderless.push(g.groupId);
    if (leaderless.length > 0)
      return { ready: false, reason: `no leader for group(s) ${leaderless.join(',')}` };
    return { ready: true };
  }

  private *schedulerFacts(): Iterable<SchedulerGroupFacts> {
    for (const [groupId, sm] of this.data) {
      const index = this.scheduler.dispatcherOf(groupId)?.index;
      yield {
        groupId,
        planningWheel: index?.planning.size ?? 0,
        dispatchWheel: index?.dispatch.size ?? 0,
        deadRuns: sm.scheduler.dead.size,
        jobs: sm.scheduler.jobs.size,
        fireRatePerSec: this.scheduler.fireRatePerSec(groupId),
      };
    }
  }

  /**
   * DLQ sizes by tenant over the data groups led here: every replica holds the same DLQ, and
   * counting it on the leader only lets a sum over the nodes count each run once. O(dead runs),
   * at scrape time.
   */
  private deadRunsByTenant(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [groupId, sm] of this.data) {
      if (this.host.groups.get(groupId)?.isLeader !== true) continue;
      // A fire id is `<tenant>/<job id>:<slot ms>` (job-key.ts); one without a tenant counts
      // under '', which no ranking names, so it lands in `other`.
      for (const fireId of sm.scheduler.dead) {
        const tenant = fireId.slice(0, Math.max(0, fireId.indexOf('/')));
        counts.set(tenant, (counts.get(tenant) ?? 0) + 1);
      }
    }
    return counts;
  }

  /**
   * Counts and logs every change of a group's leader this replica sees, and why its own role
   * changed (role-changes.ts), and counts the data groups led here (each node's share of a
   * tenant's limits follows it).
   */
  private observeLeaders(): void {
    let led = 0;
    for (const g of this.host.groups.values()) {
      if (g.groupId !== META_GROUP_ID && g.isLeader) led++;
      const raft = g.node.raft;
      const change = this.roleChanges.observe(g.groupId, raft.role, raft.term, g.leaderId);
      if (change !== undefined) this.reportRoleChange(change);
      const leader = g.leaderId;
      if (leader === NO_NODE || this.leaderSeen.get(g.groupId) === leader) continue;
      this.leaderSeen.set(g.groupId, leader);
      if (leader === this.config.id) this.ledSinceMs.set(g.groupId, Date.now());
      this.metrics.leaderChanged(g.groupId);
      this.log.info({ group: g.groupId, leader, term: g.node.raft.term }, 'leader changed');
    }
    this.dataGroupsLed = led;
  }

  /**
   * A follower that campaigned because its leader went quiet, and a leader that stepped down
   * for want of a quorum, are warnings: each points at a held or cut-off node (OPERATIONS.md,
   * Logs). Transfers, later terms and lost campaigns follow from those or are routine.
   */
  private reportRoleChange(change: RoleChange): void {
    this.metrics.roleChanged(change.reason);
    const fields = {
      group: change.groupId,
      reason: change.reason,
      from: change.from,
      to: change.to,
      termBefore: change.termBefore,
      term: change.term,
      leaderBefore: change.leaderBefore,
      leader: change.leader,
    };
    if (change.reason === 'leader-silent')
      this.log.warn(fields, 'campaigning: the leader went silent');
    else if (change.reason === 'check-quorum')
      this.log.warn(fields, 'stepped down: no quorum heard for an election timeout');
    else if (change.reason === 'transfer')
      this.log.info(fields, 'campaigning: the group is being handed to this node');
    else if (change.reason === 'higher-term')
      this.log.info(fields, 'stepped down: a later term reached this leader');
    else this.log.info(fields, 'campaign lost');
  }

  /** Counts and logs each time this node was held for `heldMs` or more (OPERATIONS.md, Logs). */
  private watchHeldLoop(heldMs: number): void {
    const cfg = this.config;
    const metrics = this.metrics;
    this.host.onSlowTurn = (turn) => {
      metrics.loopHeld('raft_turn');
      this.log.warn({ ...turn }, 'raft loop turn held the loop');
    };
    const stalls = new LoopStallWatch(cfg.tickMs, heldMs, (stall) => {
      metrics.loopHeld('event_loop');
      this.log.warn(
        { ...stall, gc: this.gcPauses.summary(Date.now() - stall.lateMs - cfg.tickMs) },
        'event loop was held',
      );
    });
    stalls.start();
    this.startOpened.push({ what: 'loop stall watch', close: () => stalls.stop() });
  }

  /** Creates this node's first replicas (bootstrap or join) on an empty store; true if so. */
  private async openOrCreate(): Promise<boolean> {
    const cfg = this.config;
    const fresh = this.store.groupIds().length === 0;
    if (fresh && cfg.join !== undefined) this.joinPeers = await this.join(cfg.join);
    else if (fresh) await this.bootstrap();
    else this.plan = cfg.initialCluster ? this.planFromFlags() : undefined;
    for (const g of this.plan?.groups ?? [])
      if (g.replicas[0] !== undefined) this.plannedLeaders.set(g.groupId, g.replicas[0]);
    return fresh;
  }

  /** Membership changes: peers, replicas created for moves here, replicas that left. */
  private wireMembership(): void {
    // Peers may still hold this node's stopping flag from its last shutdown: clear it.
    this.transport.setStopping(false);
    this.membership = new MembershipRuntime({
      selfId: this.config.id,
      host: this.host,
      meta: this.meta,
      peers: this.transport,
      peerRoutes: this.config.peerRoutes,
      log: this.log,
      splitApplied: (parentId, childId) => this.data.get(parentId)?.hasChild(childId) ?? false,
    });
    this.host.onGroupRemoved = (groupId) => {
      this.scheduler.detach(groupId);
      this.data.delete(groupId);
      this.leaderSeen.delete(groupId);
      this.roleChanges.forget(groupId);
      this.ledSinceMs.delete(groupId);
    };
  }

  private joinRequest(via: string): Parameters<typeof joinCluster>[0] {
    return {
      via,
      nodeId: this.config.id,
      peerAddress: formatHostPort(this.config.peerListen),
      apiAddress: formatHostPort(this.config.listen),
      token: this.adminToken,
      deadlineMs: Date.now() + 60_000,
      ...(this.tls.api !== undefined ? { tls: this.tls.api.dial.material } : {}),
    };
  }

  /**
   * An empty node joining: it hosts an empty meta replica (the meta leader catches it up as a
   * learner), then registers through `via`. A refused join deletes that replica again, so the
   * data directory stays empty and the node can be started again with another id.
   */
  private async join(via: string): Promise<Map<NodeId, string>> {
    await this.host.createGroup(META_GROUP_ID, undefined);
    try {
      const members = await joinCluster(this.joinRequest(via));
      this.log.info({ via, members: members.size }, 'joined the cluster');
      return members;
    } catch (err) {
      await this.host.removeGroup(META_GROUP_ID);
      throw err;
    }
  }

  private planFromFlags(): BootstrapPlan | undefined {
    const ids = [...(this.config.initialCluster?.keys() ?? [])];
    return ids.length > 0 ? planBootstrap(ids, this.config.groups) : undefined;
  }

  private initialPeers(): Map<NodeId, string> {
    const peers = new Map<NodeId, string>();
    for (const [id, addr] of this.config.initialCluster ?? [])
      if (id !== this.config.id) peers.set(id, addr);
    for (const [id, addr] of this.joinPeers) if (id !== this.config.id) peers.set(id, addr);
    for (const m of this.meta.members.values()) {
      if (m.id !== this.config.id && m.state !== 'removed') peers.set(m.id, m.peerAddress);
    }
    // --peer-route changes only where this node dials; the meta group keeps the advertised ones.
    for (const [id, addr] of this.config.peerRoutes) peers.set(id, addr);
    return peers;
  }

  private async bootstrap(): Promise<void> {
    const plan = this.planFromFlags();
    if (!plan) {
      throw new Error(
        'empty data directory and no --initial-cluster: nothing to start (give --initial-cluster to create a cluster)',
      );
    }
    this.plan = plan;
    await this.host.createGroup(META_GROUP_ID, { voters: plan.metaVoters });
    for (const g of plan.groups) {
      if (g.replicas.includes(this.config.id))
        await this.host.createGroup(g.groupId, { voters: g.replicas });
    }
  }

  private campaignPreferred(): void {
    const plan = this.plan;
    if (!plan) return;
    if (plan.metaVoters[0] === this.config.id)
      this.host.report(META_GROUP_ID, { kind: 'campaign' });
    for (const g of plan.groups) {
      if (g.replicas[0] === this.config.id) this.host.report(g.groupId, { kind: 'campaign' });
    }
  }

  get deliveryQueued(): number {
    return this.runner.queuedCount;
  }

  get deliveryInflight(): number {
    return this.runner.inflightCount;
  }

  get deliveryStats(): Readonly<DeliveryRunnerStats> {
    return this.runner.stats;
  }

  /** The test key-value state of a data group hosted here. */
  kvOf(groupId: number): KvStateMachine | undefined {
    return this.data.get(groupId)?.kv;
  }

  private afterTurn(): void {
    this.scheduler.stepAfterTurn();
    this.membership.afterTurn();
    this.observeLeaders();
    this.balanceLeaders();
    const meta = this.host.groups.get(META_GROUP_ID);
    if (!meta || this.meta.initialized || this.metaInitProposed || !meta.isLeader || !this.plan)
      return;
    this.metaInitProposed = true;
    const plan = this.plan;
    const cmd = encodeMetaCommand({
      op: 'init',
      members: plan.metaVoters.map((id) => ({
        id,
        peerAddress: this.config.initialCluster?.get(id) ?? '',
        apiAddress: id === this.config.id ? formatHostPort(this.config.listen) : '',
      })),
      groups: plan.groups.map((g) => ({
        id: g.groupId,
        start: g.start,
        end: g.end,
        replicas: g.replicas,
      })),
    });
    this.host.propose(META_GROUP_ID, cmd).then(
      () => this.log.info({ group: META_GROUP_ID }, 'meta group initialized'),
      (err: unknown) => {
        // Lost leadership or similar: let the next meta leader try again.
        this.metaInitProposed = false;
        this.log.warn(
          { group: META_GROUP_ID, err: String(err) },
          'meta init not committed; will retry',
        );
      },
    );
  }

  /**
   * Leader balancing: a data group this node has led for a second but whose preferred leader
   * is another node is handed to that node, unless we are stopping. The preferred leader is
   * where `TransferLeader` or the rebalancer last put the group (GroupRecord.preferredLeader),
   * else the bootstrap plan's first replica; so a node back from a restart gets its groups
   * back, and an operator's choice stays put.
   * - The second: a node that is stopping hands its groups away, and is not handed them back
   *   at once. And before it hands a group over, the node catches its meta replica up with a
   *   ReadIndex: a transfer's target can lead before it applied the entry that named it.
   * - At most three tries per group and preferred node while that node looks able to lead; the
   *   count starts again once it did not (it was down or behind), so it gets its groups back
   *   after a restart however the tries went while it was stopping.
   * - Never while a move of the group is in flight: the move driver hands the group away from
   *   a leaving replica, which is still a voter and may well be the preferred one, and handing
   *   it back starts that hand-over again.
   */
  private balanceLeaders(): void {
    if (this.stopping) return;
    const now = Date.now();
    for (const [groupId, replica] of this.host.groups) {
      if (groupId === META_GROUP_ID || !replica.isLeader) continue;
      const preferred = this.preferredLeaderOf(groupId);
      if (preferred === undefined || preferred === this.config.id) continue;
      const key = `${groupId}>${preferred}`;
      if (!this.mayLeadNow(replica, preferred)) {
        this.balanceAttempts.delete(key);
        continue;
      }
      if (this.meta.moves.has(groupId)) continue;
      if (now - (this.ledSinceMs.get(groupId) ?? now) < LEADER_SETTLE_MS) continue;
      // A transfer can be abandoned (the target lagged); try a few times, a second apart.
      const tried = this.balanceAttempts.get(key) ?? { count: 0, atMs: 0 };
      if (tried.count >= 3 || now - tried.atMs < 1000) continue;
      if (this.scheduler.isHandingOver(groupId)) continue;
      if (this.balanceReading.has(groupId)) continue;
      this.balanceAttempts.set(key, { count: tried.count + 1, atMs: now });
      // The meta replica here may lag the meta group by the very entry that named this node:
      // a transfer's target can lead before it applied it. Catch up (ReadIndex) and look again.
      this.balanceReading.add(groupId);
      this.host.read(META_GROUP_ID).then(
        () => {
          this.balanceReading.delete(groupId);
          this.handOverIfStillPreferred(groupId, preferred, tried.count + 1);
        },
        () => this.balanceReading.delete(groupId),
      );
    }
  }

  /** Where a data group's leadership belongs: the recorded choice, else the bootstrap plan's. */
  private preferredLeaderOf(groupId: number): NodeId | undefined {
    return this.meta.groups.get(groupId)?.preferredLeader ?? this.plannedLeaders.get(groupId);
  }

  /** Leader balancing's hand-over, once the meta replica has caught up (balanceLeaders). */
  private handOverIfStillPreferred(groupId: number, preferred: NodeId, attempt: number): void {
    const replica = this.host.groups.get(groupId);
    if (this.stopping || replica?.isLeader !== true) return;
    if (this.preferredLeaderOf(groupId) !== preferred) return;
    if (this.meta.moves.has(groupId) || this.scheduler.isHandingOver(groupId)) return;
    if (!this.mayLeadNow(replica, preferred)) return;
    const chosen = this.meta.groups.get(groupId)?.preferredLeader !== undefined;
    this.log.info(
      { group: groupId, to: preferred, try: attempt, chosen },
      chosen
        ? 'leader balancing: handing the group to its chosen leader'
        : 'leader balancing: handing the group to its planned leader',
    );
    this.scheduler.handOver(groupId, preferred);
  }

  /**
   * Whether handing a group to `id` can work now: it is still a voter of the group (a move may
   * have taken it out), an active member (not draining, not removed), live and caught up.
   * Handing over to a dead, stopping or lagging node leaves the group planning nothing until
   * Raft gives the transfer up, and a slot due meanwhile fires late or is missed.
   */
  private mayLeadNow(replica: GroupReplica, id: NodeId): boolean {
    const raft = replica.node.raft;
    if (!raft.confState.voters.includes(id)) return false;
    if (this.meta.initialized && this.meta.members.get(id)?.state !== 'active') return false;
    if (!this.isLivePeer(id)) return false;
    // Caught up: it holds everything committed (a new leader's progress starts at match 0, so
    // a live peer passes once it has answered).
    const pr = raft.progress.get(id);
    if (pr === undefined || pr.match < raft.log.committed) return false;
    // A quiesced group hears nothing from caught-up followers, so recentActive is stale there
    // (a node back from a restart would never look active); the peer stream says it is up, and
    // a follower that came back behind wakes the group by answering the leader's beacon.
    return replica.node.isQuiesced() || pr.recentActive;
  }

  /**
   * A peer that may be handed a leadership at all: our stream to it is up (it drops within
   * moments of the process exiting) and its last frame did not say it is stopping.
   */
  private isLivePeer(id: NodeId): boolean {
    return this.transport.peerState(id) === 'ready' && !this.transport.isPeerStopping(id);
  }

  /**
   * Graceful stop, run once however many signals ask for it. The node first tells its peers it
   * is stopping (they hand it nothing from then on), holds its own elections, and listens for
   * half an election timeout: nodes stopped by the same Ctrl-C, `docker compose down` or
   * orchestrator announce themselves within moments. Then every leadership goes to a live voter
   * that is not stopping (data groups drain their in-flight attempts first); a group with no
   * such voter stays here and only drains. A node whose every peer is stopping therefore hands
   * nothing over and stops at once, and stopping the whole cluster moves no leadership. All of
   * it is bounded by --shutdown-timeout-ms; then the loop, the transport and the store stop.
   */
  shutdown(): Promise<{ transferred: number; remaining: number }> {
    this.shutdownOnce ??= this.shutdownNow();
    return this.shutdownOnce;
  }

  private async shutdownNow(): Promise<{ transferred: number; remaining: number }> {
    this.stopping = true;
    if (this.campaignTimer) clearTimeout(this.campaignTimer);
    const deadline = Date.now() + this.config.shutdownTimeoutMs;
    this.transport.setStopping(true);
    // A follower here that campaigned now would take a group this node is about to leave.
    this.host.holdElections();
    const led = (): GroupReplica[] => [...this.host.groups.values()].filter((g) => g.isLeader);
    const hasLivePeer = (): boolean =>
      [...this.host.groups.values()].some((g) =>
        g.node.raft.confState.voters.some((id) => id !== this.config.id && this.isLivePeer(id)),
      );
    if (led().length > 0 && hasLivePeer()) {
      const listenMs = (this.config.raft.electionTimeoutTicks * this.config.tickMs) / 2;
      await sleep(Math.min(listenMs, Math.max(0, deadline - Date.now())));
    }
    const handedOver = new Set<number>();
    while (Date.now() < deadline) {
      let handing = 0;
      for (const g of led()) {
        const target = this.stopTargetFor(g);
        if (g.groupId === META_GROUP_ID) {
          if (target === undefined) continue;
          this.host.report(g.groupId, { kind: 'transfer-leader', to: target });
        } else {
          const current = this.scheduler.handOverTargetOf(g.groupId);
          // A target that announced its own stop meanwhile is dropped; the group drains on.
          if (current !== undefined && current !== target) this.scheduler.cancelHandOver(g.groupId);
          if (target === undefined) continue;
          this.scheduler.handOver(g.groupId, target);
        }
        handedOver.add(g.groupId);
        handing++;
      }
      if (handing === 0) break;
      await sleep(Math.min(200, this.config.tickMs * 4));
    }
    // The groups still led here had nobody to go to: their in-flight attempts finish and their
    // results commit, within the bound, before the deliveries are cut.
    const kept = led().filter((g) => g.groupId !== META_GROUP_ID);
    await Promise.all(
      kept.map((g) => this.scheduler.drain(g.groupId, Math.max(0, deadline - Date.now()))),
    );
    const remaining = led().length;
    const transferred = [...handedOver].filter((id) => !this.host.groups.get(id)?.isLeader).length;
    this.scheduler.stop();
    this.runner.close();
    this.workers.close();
    // Whatever the drain left in flight is cut: the next leader re-delivers (at least once) or
    // marks it UNKNOWN (at most once).
    await this.pools.destroy();
    await this.host.stop();
    await this.transport.close();
    await this.store.close();
    await this.ops?.close();
    return { transferred, remaining };
  }

  /**
   * Where a stopping node hands a group: the target of a hand-over under way while it stays
   * fit, else the live voter that is not stopping with the longest log; none when no voter
   * qualifies (every peer is stopping or down).
   */
  private stopTargetFor(g: GroupReplica): NodeId | undefined {
    const raft = g.node.raft;
    const fit = (id: NodeId): boolean =>
      id !== this.config.id &&
      raft.confState.voters.includes(id) &&
      this.meta.members.get(id)?.state !== 'removed' &&
      this.isLivePeer(id);
    const current = this.scheduler.handOverTargetOf(g.groupId);
    if (current !== undefined && fit(current)) return current;
    let best: NodeId | undefined;
    let bestMatch = -1;
    for (const id of raft.confState.voters) {
      const pr = raft.progress.get(id);
      if (pr === undefined || !fit(id) || pr.match <= bestMatch) continue;
      best = id;
      bestMatch = pr.match;
    }
    return best;
  }

  private die(err: unknown): void {
    this.log.error(
      { err: err instanceof Error ? err.stack : String(err) },
      'fatal error in the raft loop',
    );
    this.fatal?.(err);
  }
}

function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
