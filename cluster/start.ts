/**
 * `npm start`: a local 3-node tickraft cluster on loopback, data under ./.tickraft/ (override
 * with TICKRAFT_HOME), client API on 127.0.0.1:7001-7003, peers on 7101-7103, metrics/health
 * on 9101-9103 and the HTTP/JSON API on 8001-8003 (override the address with TICKRAFT_HOST, a
 * loopback address, and the port bases with TICKRAFT_API_PORT, TICKRAFT_PEER_PORT,
 * TICKRAFT_METRICS_PORT and TICKRAFT_HTTP_PORT). Node logs go to
 * .tickraft/<id>.log. Once ready it prints the endpoints and a first session to try with the
 * demo sink (`tickctl sink`). Its nodes may send webhooks to loopback (`--allow-target
 * 127.0.0.0/8`), where the demo sink listens; they serve no DebugService (readiness is read from
 * the public AdminService.ClusterStatus).
 * Ctrl-C, or SIGINT/SIGTERM to the npm process, stops every node gracefully; running it again
 * resumes on the same data. A second start on the same TICKRAFT_HOME while one runs is refused
 * (start.pid, taken by exclusive create; a stale one is taken over).
 * SIGHUP (what `npm run rolling-restart` sends, through .tickraft/start.pid) restarts the nodes
 * one at a time (cluster/rolling.ts), logging progress to stdout and .tickraft/rolling-restart.log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiClient } from '../src/api/client.js';
import { eventually } from '../test/helpers/cluster.js';
import { rollingRestart, type RestartableNode } from './rolling.js';

const BIN = fileURLToPath(new URL('../bin/tickraft', import.meta.url));
const home = resolve(process.env['TICKRAFT_HOME'] ?? '.tickraft');
const apiBase = Number(process.env['TICKRAFT_API_PORT'] ?? 7001);
const peerBase = Number(process.env['TICKRAFT_PEER_PORT'] ?? 7101);
const metricsBase = Number(process.env['TICKRAFT_METRICS_PORT'] ?? 9101);
const httpBase = Number(process.env['TICKRAFT_HTTP_PORT'] ?? 8001);
/** A fixed secret for the demo tenant, so the sink can check signatures without copy-paste. */
const DEMO_SECRET = 'whsec_dGlja3JhZnQtZGVtby1zZWNyZXQtMDAw';
const host = process.env['TICKRAFT_HOST'] ?? '127.0.0.1';
const ids = ['n1', 'n2', 'n3'];
const initialCluster = ids.map((id, i) => `${id}=${host}:${peerBase + i}`).join(',');

mkdirSync(home, { recursive: true });
const pidFile = join(home, 'start.pid');
/**
 * The cluster's admin token: made once (256 random bits, readable by this user only) and kept
 * across restarts, where tickctl looks for it by default.
 */
const tokenFile = join(home, 'admin.token');
if (!existsSync(tokenFile))
  writeFileSync(tokenFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
const adminToken = readFileSync(tokenFile, 'utf8').trim();

/** Whether a process with this pid exists (EPERM: it does, owned by someone else). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes $TICKRAFT_HOME/start.pid by exclusive create, so two starts cannot both win. A pid file
 * whose process is gone (a crash, a kill -9) is stale and taken over; a live one means another
 * supervisor runs this cluster, and this one leaves without touching anything of it.
 */
function takePidFile(): void {
  for (let tries = 0; tries < 3; tries++) {
    try {
      const fd = openSync(pidFile, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let pid = Number.NaN;
    try {
      pid = Number(readFileSync(pidFile, 'utf8').trim());
    } catch {
      continue; // removed meanwhile: try the create again
    }
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) {
      console.error(
        `npm start: a cluster is already running from ${home} (supervisor pid ${pid}); ` +
          'stop it (Ctrl-C or kill ' +
          `${pid}) or use another TICKRAFT_HOME. Nothing was started or changed.`,
      );
      process.exit(1);
    }
    // Stale (or half-written by a start that died at once): remove it and create ours.
    rmSync(pidFile, { force: true });
  }
  console.error(`npm start: could not take ${pidFile}; is another start racing this one?`);
  process.exit(1);
}
takePidFile();

const children = new Map<string, ChildProcess>();
let stopping = false;
/** Nodes being restarted on purpose: their exit is expected. */
const restarting = new Set<string>();

function spawnNode(id: string, i: number): ChildProcess {
  const log = openSync(join(home, `${id}.log`), 'a');
  const child = spawn(
    process.execPath,
    [
      BIN,
      'serve',
      '--id',
      id,
      '--data-dir',
      join(home, id),
      '--listen',
      `${host}:${apiBase + i}`,
      '--peer-listen',
      `${host}:${peerBase + i}`,
      '--initial-cluster',
      initialCluster,
      '--metrics-listen',
      `${host}:${metricsBase + i}`,
      '--http-listen',
      `${host}:${httpBase + i}`,
      '--admin-token-file',
      tokenFile,
      // The demo sink (tickctl sink) listens on loopback, which webhooks may not reach by default.
      '--allow-target',
      '127.0.0.0/8',
    ],
    { stdio: ['ignore', log, log] },
  );
  child.on('exit', (code, signal) => {
    if (children.get(id) === child) children.delete(id);
    if (restarting.has(id)) return;
    if (!stopping) {
      console.error(
        `${id} exited unexpectedly (code ${code}, signal ${signal}); see ${join(home, `${id}.log`)}`,
      );
    }
    if (children.size === 0) {
      rmSync(pidFile, { force: true });
      if (stopping) console.log(`stopped; the data stays in ${home} (npm start resumes on it)`);
      process.exit(stopping ? 0 : 1);
    }
  });
  children.set(id, child);
  return child;
}

for (const [i, id] of ids.entries()) spawnNode(id, i);

const rollingLog = join(home, 'rolling-restart.log');
let rolling = false;

async function rollingRestartAll(): Promise<void> {
  if (rolling || stopping) return;
  rolling = true;
  const say = (line: string): void => {
    console.log(`rolling restart: ${line}`);
    appendFileSync(rollingLog, `${line}\n`);
  };
  const nodes: RestartableNode[] = ids.map((id, i) => ({
    id,
    endpoint: `${host}:${apiBase + i}`,
    stop: async () => {
      const child = children.get(id);
      if (!child) return;
      restarting.add(id);
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
    start: () => {
      spawnNode(id, i);
      restarting.delete(id);
    },
  }));
  const t0 = performance.now();
  try {
    const reports = await rollingRestart(nodes, say, { token: adminToken });
    const moved = reports.reduce((n, r) => n + r.leadershipsMoved, 0);
    say(
      `done: ${reports.length} nodes in ${((performance.now() - t0) / 1000).toFixed(1)} s, ` +
        `${moved} leaderships handed over`,
    );
  } catch (err) {
    say(`failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    rolling = false;
  }
}

function stop(): void {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping: each node hands its leaderships over, then exits');
  for (const child of children.values()) child.kill('SIGTERM');
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
// A supervisor whose own parent is gone (npm killed with SIGKILL, a closed terminal's shell)
// would leave the cluster running with nobody to stop it: it stops too, once re-parented.
const parentAtStart = process.ppid;
setInterval(() => {
  if (process.ppid !== parentAtStart) stop();
}, 1000).unref();
process.on('SIGHUP', () => void rollingRestartAll());

/** What the readiness probe reads of ClusterStatus: every group (meta first) and its leader. */
interface Status {
  groups: { groupId: number; leader: string }[];
}
const probe = new ApiClient(`${host}:${apiBase}`, 1000, {}, { token: adminToken });
const status = (): Promise<Status> => probe.call<Status>('AdminService', 'ClusterStatus', {});
try {
  // Ready: the meta group lists the data groups, and every group (meta included) has a leader.
  const st = await eventually(async () => {
    const s = await status();
    if (s.groups.length < 2 || s.groups.some((g) => !g.leader)) throw new Error('not ready');
    return s;
  }, 60_000);
  // Leadership is handed to each group's preferred node right after start; give it a moment.
  const countLeaders = (groups: { leader: string }[]): Map<string, number> => {
    const m = new Map<string, number>();
    for (const g of groups) m.set(g.leader, (m.get(g.leader) ?? 0) + 1);
    return m;
  };
  // A status read mid-hand-over shows a group with no leader: only whole pictures are kept.
  let leaders = countLeaders(st.groups);
  for (let i = 0; i < 50; i++) {
    const counts = ids.map((id) => leaders.get(id) ?? 0);
    if (Math.max(...counts) - Math.min(...counts) <= 1) break;
    await new Promise((r) => setTimeout(r, 100));
    const groups = (await status()).groups;
    if (groups.every((g) => g.leader)) leaders = countLeaders(groups);
  }
  console.log(`tickraft: 3 nodes ready, ${st.groups.length - 1} data groups + the meta group`);
  for (const [i, id] of ids.entries()) {
    console.log(
      `  ${id}  api ${host}:${apiBase + i}  peer ${host}:${peerBase + i}  ` +
        `metrics http://${host}:${metricsBase + i}/metrics  http http://${host}:${httpBase + i}  ` +
        `leads ${leaders.get(id) ?? 0} groups  data ${join(home, id)}`,
    );
  }
  const endpoint = apiBase === 7001 && host === '127.0.0.1' ? '' : ` --endpoint ${host}:${apiBase}`;
  console.log(`
Try it. In a second terminal, a demo webhook receiver that prints each fire:
  npm run tickctl -- sink --secret ${DEMO_SECRET}
In a third, a tenant with the same secret and a job that fires every 5 seconds:
  npm run tickctl -- tenants create acme --secret ${DEMO_SECRET}${endpoint}
  npm run tickctl -- jobs create hello --tenant acme --schedule '*/5 * * * * *' --url http://127.0.0.1:8080/hook${endpoint}
  npm run tickctl -- runs list hello --tenant acme${endpoint}
  npm run tickctl -- cluster status${endpoint}
tickctl calls with the admin token in ${tokenFile} (made by the first npm start; keep it secret).
Health and readiness: http://${host}:${metricsBase}/healthz and /readyz (docs/OPERATIONS.md).
The HTTP/JSON API (docs/HTTP.md), with the same token:
  curl -H "Authorization: Bearer $(cat ${tokenFile})" http://${host}:${httpBase}/v1/tenants/acme/jobs
npm run rolling-restart restarts the nodes one at a time while jobs keep firing.
Ctrl-C stops the cluster; npm start again resumes on the same data.`);
} catch (err) {
  console.error(
    `cluster did not become ready: ${err instanceof Error ? err.message : String(err)}`,
  );
  console.error(`logs: ${home}/n*.log`);
  stop();
} finally {
  probe.close();
}
