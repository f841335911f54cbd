// A newcomer's first minute, end to end, with real processes only: the cluster started as
// `npm start` starts it (cluster/start.ts), the demo receiver `tickctl sink` as a process, the
// first-session commands start.ts prints run as printed (with the sink moved to a free port), one
// job created with tickctl and one with the gRPC client (src/api/client.ts). The sink must receive
// every slot of the every-second and every-2-seconds jobs, signed, lag within a generous bound.
// Then kill -9 of one node: calls through the others keep succeeding, fires keep coming with no
// slot skipped, and Ctrl-C still stops what is left with exit 0.
// What other files already cover is not repeated here: field-by-field INVALID_ARGUMENT and the
// retried CreateJob with one request id (api-validation, api-routing), npm start's restart on
// the same data (npm-start), the rows of the failure table (scheduler-*).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { ApiClient } from '../../src/api/client.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { freePort, sleep } from '../helpers/cluster.js';
import { nodeCommand } from '../helpers/node-child.js';

type Obj = Record<string, unknown>;
const START = fileURLToPath(new URL('../../cluster/start.ts', import.meta.url));
const TICKCTL = fileURLToPath(new URL('../../bin/tickctl', import.meta.url));
const HOST = '127.0.0.1';

/** A port such that it and the next `count - 1` are free (start.ts numbers its nodes' ports). */
async function freePortRun(count: number, taken: Set<number>): Promise<number> {
  for (;;) {
    const base = await freePort(HOST);
    const run = Array.from({ length: count }, (_, i) => base + i);
    if (run.some((p) => taken.has(p))) continue;
    const free = await Promise.all(run.map(isFree));
    if (free.every(Boolean)) {
      for (const p of run) taken.add(p);
      return base;
    }
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

interface Proc {
  readonly child: ChildProcess;
  readonly out: { text: string };
  readonly exited: Promise<number | null>;
}

function launch(args: string[], env: NodeJS.ProcessEnv = process.env): Proc {
  const [command, argv] = nodeCommand(args, env);
  const child = spawn(command, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { text: '' };
  child.stdout?.on('data', (d: Buffer) => (out.text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out.text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, exited };
}

async function waitFor(p: Proc, pattern: RegExp, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pattern.test(p.out.text)) {
    if (Date.now() > deadline || p.child.exitCode !== null)
      throw new Error(`waiting for ${pattern}: ${p.out.text.slice(-2000)}`);
    await sleep(100);
  }
}

/** Where `npm start` keeps its data and admin token; tickctl finds the token there. */
let clusterHome = '';

async function tickctl(args: string[]): Promise<{ code: number | null; out: string }> {
  const p = launch([TICKCTL, ...args], { ...process.env, TICKRAFT_HOME: clusterHome });
  const code = await p.exited;
  return { code, out: p.out.text };
}

/** `npm run tickctl -- a 'b c' d` → ['a', 'b c', 'd']. */
function argsOf(line: string): string[] {
  const rest = line.slice(line.indexOf('--') + 2);
  return [...rest.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
}

interface Fire {
  readonly jobId: string;
  readonly slotMs: number;
  readonly lagMs: number;
  readonly signatureOk: boolean;
}

/** The fires `tickctl sink` printed, one line each. */
function firesOf(text: string): Fire[] {
  const out: Fire[] = [];
  for (const m of text.matchAll(
    /job (\S+) {2}fire \S+ {2}slot (\S+) {2}lag (-?\d+)ms .* signature (ok|BAD|unchecked)/g,
  ))
    out.push({
      jobId: m[1]!,
      slotMs: Date.parse(m[2]!),
      lagMs: Number(m[3]),
      signatureOk: m[4] === 'ok',
    });
  return out;
}

/** Slots of `everyMs` between the first fire and `untilMs` that the sink never received. */
function missingSlots(fires: Fire[], jobId: string, everyMs: number, untilMs: number): number[] {
  const slots = new Set(fires.filter((f) => f.jobId === jobId).map((f) => f.slotMs));
  const first = Math.min(...slots);
  const missing: number[] = [];
  for (let s = first; s <= untilMs; s += everyMs) if (!slots.has(s)) missing.push(s);
  return missing;
}

t.test('npm start, tickctl and gRPC creates, the sink, and a kill -9', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'tickraft-e2e-'));
  clusterHome = home;
  const taken = new Set<number>();
  const api = await freePortRun(3, taken);
  const peer = await freePortRun(3, taken);
  const metrics = await freePortRun(3, taken);
  const httpPort = await freePortRun(3, taken);
  const sinkPort = await freePortRun(1, taken);
  const cluster = launch(['--import', 'tsx', START], {
    ...process.env,
    TICKRAFT_HOME: home,
    TICKRAFT_HOST: HOST,
    TICKRAFT_API_PORT: String(api),
    TICKRAFT_PEER_PORT: String(peer),
    TICKRAFT_METRICS_PORT: String(metrics),
    TICKRAFT_HTTP_PORT: String(httpPort),
  });
  let nodePids = new Map<string, number>();
  /** Started once start.ts has printed the demo secret. */
  const started: { sink?: Proc } = {};
  t.teardown(async () => {
    // Ctrl-C as a person would; anything left after the bound is killed by its own pid.
    cluster.child.kill('SIGINT');
    started.sink?.child.kill('SIGINT');
    await Promise.race([Promise.all([cluster.exited, started.sink?.exited]), sleep(20_000)]);
    for (const pid of nodePids.values()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone: the usual case.
      }
    }
    cluster.child.kill('SIGKILL');
    started.sink?.child.kill('SIGKILL');
    rmSync(home, { recursive: true, force: true });
  });

  await waitFor(cluster, /Ctrl-C stops the cluster/, 90_000);
  const printed = cluster.out.text;
  t.match(printed, /3 nodes ready/);
  nodePids = childPids(cluster.child.pid!);
  t.equal(nodePids.size, 3, `three node processes (${[...nodePids.keys()].join(' ')})`);

  // The first session, as printed: the sink with the demo secret, the tenant, the demo job.
  const lines = printed.split('\n').filter((l) => l.includes('npm run tickctl -- '));
  const sinkLine = lines.find((l) => l.includes(' sink '));
  const secret = argsOf(sinkLine ?? '')[2] ?? '';
  t.match(secret, /^whsec_/, 'the printed sink command carries the demo secret');
  const receiver = launch([TICKCTL, 'sink', '--listen', `${HOST}:${sinkPort}`, '--secret', secret]);
  started.sink = receiver;
  await waitFor(receiver, /listening on/, 30_000);
  const hookUrl = `http://${HOST}:${sinkPort}/hook`;
  for (const line of lines.filter((l) => !l.includes(' sink '))) {
    const args = argsOf(line).map((a) => a.replace('http://127.0.0.1:8080/hook', hookUrl));
    const r = await tickctl(args);
    t.equal(r.code, 0, `printed command works: tickctl ${args.slice(0, 3).join(' ')}: ${r.out}`);
  }
  const endpoint = `${HOST}:${api}`;

  // One job through tickctl, one through the gRPC client on another node.
  const viaCli = await tickctl([
    'jobs',
    'create',
    'every-2s',
    '--tenant',
    'acme',
    '--schedule',
    'every 2s',
    '--url',
    hookUrl,
    '--endpoint',
    `${HOST}:${api + 2}`,
  ]);
  t.equal(viaCli.code, 0, viaCli.out);
  const token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  const clients = [0, 1, 2].map((i) => new ApiClient(`${HOST}:${api + i}`, 5000, {}, { token }));
  t.teardown(() => clients.forEach((c) => c.close()));
  const created = await clients[1]!.call<Obj>('JobService', 'CreateJob', {
    jobId: 'every-1s',
    requestId: 'e2e-every-1s',
    spec: { tenant: 'acme', schedule: '* * * * * *', target: { url: hookUrl } },
  });
  t.equal((created['job'] as Obj)['id'], 'every-1s');
  const listed = await tickctl([
    'jobs',
    'list',
    '--tenant',
    'acme',
    '--json',
    '--endpoint',
    endpoint,
  ]);
  t.same(
    (JSON.parse(listed.out) as { jobs: Obj[] }).jobs.map((j) => j['id']),
    ['every-1s', 'every-2s', 'hello'],
    'tickctl lists the three jobs',
  );

  await sleep(8000);
  const killedAtMs = Date.now();
  const before = firesOf(receiver.out.text);
  t.ok(before.filter((f) => f.jobId === 'every-1s').length >= 5, 'every-1s fires');
  t.ok(before.filter((f) => f.jobId === 'hello').length >= 1, 'the printed demo job fires');
  t.ok(
    before.every((f) => f.signatureOk),
    'every fire verifies with the demo secret',
  );
  const lagBefore = Math.max(...before.map((f) => f.lagMs));
  t.ok(lagBefore < 2000, `lag under 2 s before the kill (max ${lagBefore} ms)`);

  // kill -9 n1 (the node behind the default endpoint): calls through n2 and n3 keep working.
  process.kill(nodePids.get('n1')!, 'SIGKILL');
  await waitFor(cluster, /n1 exited unexpectedly/, 10_000);
  const survivors = clients.slice(1);
  // A client does what UNAVAILABLE asks: wait the retry hint and call again. A group whose leader
  // died re-elects within about an election timeout when busy; an idle (quiesced) group only
  // after its followers miss three beacons (src/raft/config.ts), a few seconds.
  let waitedMs = 0;
  const retrying = <T>(call: () => Promise<T>): Promise<T> =>
    retryUnavailable(call, 30_000, (pauseMs) => (waitedMs += pauseMs));
  const t0 = Date.now();
  for (let i = 0; i <= 6; i++) {
    const c = survivors[i % 2]!;
    const other = survivors[(i + 1) % 2]!;
    await retrying(() =>
      c.call('JobService', 'CreateJob', {
        jobId: `after-kill-${i}`,
        requestId: `after-kill-${i}`,
        spec: { tenant: 'acme', schedule: '0 0 1 1 *', target: { url: hookUrl } },
      }),
    );
    const got = await retrying(() =>
      other.call<Obj>('JobService', 'GetJob', { tenant: 'acme', jobId: `after-kill-${i}` }),
    );
    t.equal(got['id'], `after-kill-${i}`, `create via one survivor, read via the other (${i})`);
  }
  const list = await retrying(() =>
    survivors[0]!.call<Obj>('JobService', 'ListJobs', { tenant: 'acme' }),
  );
  t.equal((list['jobs'] as Obj[]).length, 10, 'ListJobs through a survivor sees every job');
  t.comment(
    `after the kill: creates, reads and a list done in ${Date.now() - t0} ms, ` +
      `of which ${waitedMs} ms waiting on UNAVAILABLE retry hints`,
  );
  const cli = await tickctl([
    'jobs',
    'get',
    'every-1s',
    '--tenant',
    'acme',
    '--endpoint',
    `${HOST}:${api + 2}`,
  ]);
  t.equal(cli.code, 0, 'tickctl against a survivor');

  await sleep(6000);
  const untilMs = Date.now() - 3000;
  const fires = firesOf(receiver.out.text);
  t.same(missingSlots(fires, 'every-1s', 1000, untilMs), [], 'every-1s: no slot missing');
  t.same(missingSlots(fires, 'every-2s', 2000, untilMs), [], 'every-2s: no slot missing');
  const after = fires.filter((f) => f.slotMs > killedAtMs);
  t.ok(after.filter((f) => f.jobId === 'every-1s').length >= 4, 'fires continue after the kill');
  const lagAfter = Math.max(...after.map((f) => f.lagMs));
  t.ok(lagAfter < 5000, `lag across the failover within the misfire bound (max ${lagAfter} ms)`);

  cluster.child.kill('SIGINT');
  t.equal(await cluster.exited, 0, 'Ctrl-C stops the two nodes left, exit 0');
  receiver.child.kill('SIGINT');
  t.equal(await receiver.exited, 0, 'the sink stops on Ctrl-C');
  t.match(receiver.out.text, /stopped \(SIGINT\) after \d+ request/);
});

/** The node processes start.ts spawned, by node id (from their command lines). */
function childPids(parent: number): Map<string, number> {
  const out = new Map<string, number>();
  const text = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(parent)], {
    encoding: 'utf8',
  });
  for (const line of text.split('\n')) {
    const m = /^\s*(\d+)\s.*--id (n\d+)/.exec(line);
    if (m) out.set(m[2]!, Number(m[1]));
  }
  return out;
}
