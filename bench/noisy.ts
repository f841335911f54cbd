/**
 * A noisy neighbour, for `npm run bench -- --only noisy`: how late a healthy tenant's P0
 * webhooks arrive on their own, and while another tenant floods an endpoint that does not answer,
 * in one run on one cluster.
 *
 * One `tickraft serve` node (it leads every group, so every run of both tenants passes through
 * its one delivery queue and hand-out, the place the issue is about; a single process also keeps
 * the machine's two cores for the node, the sink and the bench instead of three nodes' Raft
 * traffic), default delivery settings. Each phase:
 *
 *   - `healthyJobs` one-off P0 jobs of tenant `healthy`, due one after another across a
 *     `windowMs` window, at a recording sink in a process of its own; lag = receipt − slot
 *     (`tickraft-scheduled-for`), each fire id counted once;
 *   - in a flood phase, also `floodJobs` one-off jobs of tenant `noisy` (default priority, P2)
 *     due across the same window at an origin of their own: `hang` (a TCP server that accepts
 *     connections and never answers: each attempt holds a connection until its 30 s deadline),
 *     `slow` (answers 200 after 5 s), `refused` (a closed port: every attempt fails at once and
 *     is retried with backoff).
 *
 * The bench waits for the healthy fires until all arrived or `waitMs` after the window's end,
 * then cancels the noisy tenant's jobs (BulkCancel), closes its endpoint (dropping the
 * connections held) and waits until the node's delivery queue is empty, so that the next phase
 * starts clean; healthy fires that arrive after the cut-off are counted apart. Figures only;
 * a healthy fire that did not arrive in time is the caller's functional failure.
 */
import * as http from 'node:http';
import * as net from 'node:net';
import { ApiCallError, type ApiClient } from '../src/api/client.js';
import { freePort, ProcCluster, sleep, type ProcNode } from '../test/helpers/cluster.js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';
import { apiClients } from './bench-cluster.js';
import { fmt, machineContext, percentile } from './figures.js';
import { createBatch } from './registration.js';
import { startSinkProcess } from './sink-process.js';

/** What the noisy tenant's endpoint does, one flood phase each. */
export const FLOODS = ['hang', 'slow', 'refused'] as const;
export type Flood = (typeof FLOODS)[number];
export type NoisyPhaseName = 'alone' | Flood;
/** The floods `npm run bench` runs by default: all of them. */
export const DEFAULT_FLOODS: readonly Flood[] = ['hang', 'slow', 'refused'];

export function isFlood(s: string): s is Flood {
  return (FLOODS as readonly string[]).includes(s);
}

const FLOOD_WHAT: Record<Flood, string> = {
  hang: 'a hanging endpoint (accepts, never answers)',
  slow: 'an endpoint answering after 5 s',
  refused: 'a closed port (connection refused)',
};

/** How long the slow endpoint takes to answer. */
const SLOW_MS = 5000;
/** Time allowed to create a phase's jobs before the window, plus the look-ahead's 4 s. */
const CREATE_BUDGET_MS = 2000;
const LOOK_AHEAD_MS = 4000;
const HEALTHY = 'healthy';
const NOISY = 'noisy';

export interface NoisyOptions {
  /** Healthy P0 jobs per phase. */
  readonly healthyJobs: number;
  /** Noisy jobs per flood phase. */
  readonly floodJobs: number;
  /** The flood phases, in order, after the phase `alone`. */
  readonly floods: readonly Flood[];
  readonly groups: number;
  /** The window over which each tenant's jobs fall due. @default 5000 */
  readonly windowMs?: number;
  /** How long after the window's end the healthy fires are awaited. @default 60000 */
  readonly waitMs?: number;
  readonly log: (line: string) => void;
}

export interface NoisyPhase {
  readonly phase: NoisyPhaseName;
  /** `alone`, or what the flood's endpoint does. */
  readonly what: string;
  readonly expected: number;
  /** Distinct healthy fires received before the cut-off. */
  readonly received: number;
  readonly duplicates: number;
  /**
   * Lag percentiles over every expected fire, a fire not received by the cut-off counting as
   * later than all (Infinity; `null` in JSON).
   */
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** From the window's end to the cut-off: a missing fire is at least about this late. */
  readonly waitedMs: number;
  /** Noisy jobs of the phase (0 alone). */
  readonly floodJobs: number;
  /** Healthy fires of the phase received after the cut-off, once the flood was cancelled. */
  readonly arrivedAfterCancel: number;
  /** hang: connections the endpoint accepted; slow: requests it received; otherwise 0. */
  readonly endpointHits: number;
  /** The node's delivery queue at the window's end: attempts waiting, attempts in flight. */
  readonly queuedAtWindowEnd: number;
  readonly inflightAtWindowEnd: number;
  /** Time left before the window once every job was created. */
  readonly marginMs: number;
  /** The 1/5/15-minute load average as the phase began. */
  readonly load: readonly number[];
}

export interface NoisyResult {
  readonly nodes: number;
  readonly groups: number;
  readonly windowMs: number;
  readonly waitMs: number;
  readonly phases: readonly NoisyPhase[];
  /** Calls that failed (job creation, the cancel): the caller's functional failures. */
  readonly errors: readonly string[];
}

/**
 * The healthy sink: for each `/hook/<phase>`, the lag of each fire id's first receipt and the
 * duplicates; GET /count/<phase> (cheap while busy) and /stats/<phase>.
 */
const SINK_SOURCE = `
const http = require('node:http');
const phases = new Map();
const of = (p) => {
  let s = phases.get(p);
  if (!s) phases.set(p, (s = { ids: new Set(), lags: [], dup: 0 }));
  return s;
};
const server = http.createServer((req, res) => {
  const [, kind, phase] = (req.url || '').split('/');
  if (kind === 'count') { res.end(String(of(phase).lags.length)); return; }
  if (kind === 'stats') {
    const s = of(phase);
    res.end(JSON.stringify({ count: s.lags.length, dup: s.dup, lags: [...s.lags].sort((a, b) => a - b) }));
    return;
  }
  req.resume();
  req.on('end', () => {
    const now = Date.now();
    const s = of(phase);
    const id = req.headers['idempotency-key'];
    if (s.ids.has(id)) s.dup++;
    else {
      s.ids.add(id);
      s.lags.push(now - Date.parse(req.headers['tickraft-scheduled-for']));
    }
    res.writeHead(200, { 'content-length': '2' });
    res.end('ok');
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

interface SinkStats {
  readonly count: number;
  readonly dup: number;
  readonly lags: number[];
}

async function sinkCount(origin: string, phase: string): Promise<number> {
  const res = await fetch(`${origin}/count/${phase}`);
  return Number(await res.text());
}

async function sinkStats(origin: string, phase: string): Promise<SinkStats> {
  const res = await fetch(`${origin}/stats/${phase}`);
  return (await res.json()) as SinkStats;
}

/** The noisy tenant's endpoint of one phase. */
interface FloodEndpoint {
  readonly origin: string;
  /** hang: connections accepted; slow: requests received. */
  hits(): number;
  /** Stops it and drops what it holds (the node's attempts then fail at once). */
  close(): Promise<void>;
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  return typeof addr === 'object' && addr !== null ? addr.port : 0;
}

async function closeServer(server: net.Server): Promise<void> {
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Accepts connections, reads what comes, never answers. */
async function hangingEndpoint(): Promise<FloodEndpoint> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    socket.resume();
  });
  const port = await listen(server);
  return {
    origin: `http://127.0.0.1:${port}`,
    hits: () => accepted,
    async close() {
      if (!server.listening) return;
      for (const s of sockets) s.destroy();
      await closeServer(server);
    },
  };
}

/** Answers every request 200 after SLOW_MS. */
async function slowEndpoint(): Promise<FloodEndpoint> {
  let requests = 0;
  const timers = new Set<NodeJS.Timeout>();
  const server = http.createServer((req, res) => {
    requests++;
    req.resume();
    const timer = setTimeout(() => {
      timers.delete(timer);
      res.writeHead(200, { 'content-length': '2' }).end('ok');
    }, SLOW_MS);
    timers.add(timer);
  });
  const port = await listen(server);
  return {
    origin: `http://127.0.0.1:${port}`,
    hits: () => requests,
    async close() {
      if (!server.listening) return;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      await closeServer(server);
    },
  };
}

/** A port nothing listens on. */
async function refusedEndpoint(): Promise<FloodEndpoint> {
  const port = await freePort('127.0.0.1');
  return { origin: `http://127.0.0.1:${port}`, hits: () => 0, close: () => Promise.resolve() };
}

function floodEndpoint(flood: Flood): Promise<FloodEndpoint> {
  switch (flood) {
    case 'hang':
      return hangingEndpoint();
    case 'slow':
      return slowEndpoint();
    case 'refused':
      return refusedEndpoint();
  }
}

/** `count` one-off jobs of `tenant`, due evenly across [startMs, startMs + windowMs). */
function oneOffJobs(opts: {
  tenant: string;
  prefix: string;
  count: number;
  startMs: number;
  windowMs: number;
  url: string;
  priority?: number;
}): Record<string, unknown>[] {
  const jobs: Record<string, unknown>[] = [];
  for (let i = 0; i < opts.count; i++) {
    const slotMs = opts.startMs + Math.floor((i * opts.windowMs) / opts.count);
    const jobId = `${opts.prefix}-${String(i).padStart(6, '0')}`;
    jobs.push({
      jobId,
      requestId: jobId,
      spec: {
        tenant: opts.tenant,
        schedule: `at ${new Date(slotMs).toISOString()}`,
        target: { url: opts.url },
        ...(opts.priority === undefined ? {} : { priority: opts.priority }),
      },
    });
  }
  return jobs;
}

async function createAll(
  client: ApiClient,
  jobs: readonly Record<string, unknown>[],
): Promise<number> {
  let created = 0;
  for (let i = 0; i < jobs.length; i += 1000)
    created += (await createBatch(client, jobs.slice(i, i + 1000))).created;
  return created;
}

/** BulkCancel of the noisy tenant; a BULK_INCOMPLETE answer (a group changing leader) once more. */
async function cancelNoisy(client: ApiClient): Promise<void> {
  try {
    await client.call('AdminService', 'BulkCancel', { tenant: NOISY }, 30_000);
  } catch (err) {
    if (!(err instanceof ApiCallError) || err.code !== 'BULK_INCOMPLETE') throw err;
    await sleep(err.retryDelayMs ?? 500);
    await client.call('AdminService', 'BulkCancel', { tenant: NOISY }, 30_000);
  }
}

/** Waits (at most `boundMs`) until the node has no attempt queued or in flight, twice in a row. */
async function untilIdle(node: ProcNode, boundMs: number): Promise<boolean> {
  const deadline = Date.now() + boundMs;
  let quiet = 0;
  while (Date.now() < deadline) {
    const st = await node.status(5000);
    quiet = st.deliveryQueued + st.deliveryInflight === 0 ? quiet + 1 : 0;
    if (quiet >= 2) return true;
    await sleep(250);
  }
  return false;
}

/** A lag for display: `> 60,000` for a fire that never arrived (Infinity). */
export function lagText(ms: number, waitedMs: number): string {
  return Number.isFinite(ms) ? fmt(ms) : `> ${fmt(waitedMs)}`;
}

export function describePhase(p: NoisyPhase): string {
  const lag = (ms: number): string => lagText(ms, p.waitedMs);
  return (
    `received ${fmt(p.received)}/${fmt(p.expected)} (dup ${p.duplicates}), ` +
    `lag p50 ${lag(p.lagP50Ms)} ms, p99 ${lag(p.lagP99Ms)} ms, max ${lag(p.lagMaxMs)} ms`
  );
}

export async function runNoisy(opts: NoisyOptions): Promise<NoisyResult> {
  const windowMs = opts.windowMs ?? 5000;
  const waitMs = opts.waitMs ?? 60_000;
  const { log } = opts;
  const errors: string[] = [];
  const phases: NoisyPhase[] = [];
  const t0 = performance.now();
  const sink = await startSinkProcess(SINK_SOURCE);
  const cluster = await ProcCluster.create({ nodes: 1, groups: opts.groups });
  let client: ApiClient | undefined;
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    const node = cluster.nodes[0]!;
    const api = (await apiClients(cluster))[0]!;
    client = api;
    for (const tenantId of [HEALTHY, NOISY])
      await api.call('TenantService', 'CreateTenant', { tenantId, signingSecret: TEST_SECRET });
    log(
      `  1 node (${opts.groups} groups, all led there), default delivery settings; each phase: ` +
        `${fmt(opts.healthyJobs)} P0 jobs of tenant ${HEALTHY} due across ${fmt(windowMs)} ms` +
        (opts.floods.length > 0
          ? `, with ${fmt(opts.floodJobs)} jobs of tenant ${NOISY} (P2) across the same window in a flood phase`
          : ''),
    );

    for (const phase of ['alone', ...opts.floods] as const) {
      const flood = phase === 'alone' ? undefined : phase;
      const load = machineContext().load;
      const endpoint = flood === undefined ? undefined : await floodEndpoint(flood);
      try {
        const startMs = Math.ceil((Date.now() + CREATE_BUDGET_MS + LOOK_AHEAD_MS) / 1000) * 1000;
        const healthy = oneOffJobs({
          tenant: HEALTHY,
          prefix: `${phase}-h`,
          count: opts.healthyJobs,
          startMs,
          windowMs,
          url: `${sink.origin}/hook/${phase}`,
          priority: 0,
        });
        const noisy =
          endpoint === undefined
            ? []
            : oneOffJobs({
                tenant: NOISY,
                prefix: `${phase}-n`,
                count: opts.floodJobs,
                startMs,
                windowMs,
                url: `${endpoint.origin}/hook`,
              });
        let createdHealthy = 0;
        let createdNoisy = 0;
        try {
          createdHealthy = await createAll(api, healthy);
          createdNoisy = await createAll(api, noisy);
        } catch (err) {
          errors.push(
            `${phase}: creating jobs: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
        if (createdHealthy !== healthy.length || createdNoisy !== noisy.length)
          errors.push(
            `${phase}: ${fmt(createdHealthy)} of ${fmt(healthy.length)} healthy and ${fmt(createdNoisy)} of ${fmt(noisy.length)} noisy jobs created`,
          );
        const marginMs = startMs - Date.now();
        if (marginMs < 3500)
          log(
            `  WARNING: ${phase}: jobs created ${fmt(marginMs)} ms before the window (look-ahead needs 3,500)`,
          );

        const endMs = startMs + windowMs;
        while (Date.now() < endMs) await sleep(Math.min(100, Math.max(1, endMs - Date.now())));
        const atEnd = await node.status(5000);
        const cutoff = endMs + waitMs;
        let received = await sinkCount(sink.origin, phase);
        while (received < opts.healthyJobs && Date.now() < cutoff) {
          await sleep(250);
          received = await sinkCount(sink.origin, phase);
        }
        const waitedMs = Math.max(0, Date.now() - endMs);
        const stats = await sinkStats(sink.origin, phase);

        let arrivedAfterCancel = 0;
        if (endpoint !== undefined) {
          try {
            await cancelNoisy(api);
          } catch (err) {
            errors.push(
              `${phase}: BulkCancel ${NOISY}: ${err instanceof Error ? err.message : String(err)}`,
            );
          }
          await endpoint.close();
          if (!(await untilIdle(node, 30_000)))
            log(
              `  WARNING: ${phase}: the node's delivery queue was not empty 30 s after the cancel`,
            );
          arrivedAfterCancel = (await sinkCount(sink.origin, phase)) - stats.count;
        }

        // Every expected fire counts: one that never arrived is later than any that did.
        const all = [
          ...stats.lags,
          ...Array.from({ length: Math.max(0, opts.healthyJobs - stats.count) }, () => Infinity),
        ];
        const p: NoisyPhase = {
          phase,
          what: flood === undefined ? 'alone' : FLOOD_WHAT[flood],
          expected: opts.healthyJobs,
          received: stats.count,
          duplicates: stats.dup,
          lagP50Ms: percentile(all, 50),
          lagP99Ms: percentile(all, 99),
          lagMaxMs: all[all.length - 1] ?? Number.NaN,
          waitedMs,
          floodJobs: noisy.length,
          arrivedAfterCancel,
          endpointHits: endpoint?.hits() ?? 0,
          queuedAtWindowEnd: atEnd.deliveryQueued,
          inflightAtWindowEnd: atEnd.deliveryInflight,
          marginMs,
          load,
        };
        phases.push(p);
        log(
          `  ${flood === undefined ? 'alone' : `under a flood of ${fmt(p.floodJobs)} jobs at ${p.what}`} ` +
            `(load ${load.join(' ')}): ${describePhase(p)}`,
        );
        log(
          `    at the window's end the node had ${fmt(p.queuedAtWindowEnd)} attempts queued, ${fmt(p.inflightAtWindowEnd)} in flight` +
            (flood === 'hang' ? `; the endpoint accepted ${fmt(p.endpointHits)} connections` : '') +
            (flood === 'slow' ? `; the endpoint received ${fmt(p.endpointHits)} requests` : '') +
            (p.received < p.expected
              ? `; waited ${fmt(waitedMs)} ms after the window, ${fmt(arrivedAfterCancel)} more arrived once the flood was cancelled`
              : ''),
        );
      } finally {
        await endpoint?.close();
      }
    }
    log(`  the part's wall time: ${fmt((performance.now() - t0) / 1000)} s`);
    // A graceful stop lets `TICKRAFT_NODE_ARGS=--cpu-prof` write the node's profile.
    await Promise.all(cluster.nodes.map((n) => n.term()));
    return { nodes: 1, groups: opts.groups, windowMs, waitMs, phases, errors };
  } finally {
    client?.close();
    cluster.cleanup();
    sink.child.kill();
  }
}
