// `npm start` as a newcomer runs it: three nodes come up and report ready with balanced
// leaders, print their endpoints (metrics too, where /readyz answers 200) and a first session
// with the demo sink, Ctrl-C (SIGINT) stops everything with exit 0 and no node left running,
// and a second start resumes on the same data. Runs cluster/start.ts with ports and data dir moved aside.
import t from 'tap';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, randomLoopbackHost } from '../helpers/cluster.js';
import { localClusterEnv } from '../helpers/local-cluster-env.js';
import { nodeCommand, withoutTapLoaderCommand } from '../helpers/node-child.js';

const START = fileURLToPath(new URL('../../cluster/start.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

async function startOnce(
  home: string,
  host: string,
  api: number,
  peer: number,
  metrics: number,
  http: number,
): Promise<{ out: string; code: number | null; readyz: number; httpStatus: number }> {
  const env = localClusterEnv({ home, host, api, peer, metrics, http });
  const child = spawn(...nodeCommand(['--import', 'tsx', START], env), {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  while (
    !out.includes('Ctrl-C stops the cluster') &&
    Date.now() < deadline &&
    child.exitCode === null
  ) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const readyz = await fetch(`http://${host}:${metrics + 2}/readyz`).then(
    (r) => r.status,
    () => 0,
  );
  const token = readFileSync(join(home, 'admin.token'), 'utf8').trim();
  const httpStatus = await fetch(`http://${host}:${http + 2}/v1/admin/cluster`, {
    headers: { authorization: `Bearer ${token}` },
  }).then(
    (r) => r.status,
    () => 0,
  );
  child.kill('SIGINT');
  const code = await exited;
  return { out, code, readyz, httpStatus };
}

t.test('npm start brings up 3 nodes, stops on Ctrl-C, and resumes', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'tickraft-start-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  // Port bases; the two ports after each are assumed free as well (ephemeral ports are sparse).
  const host = randomLoopbackHost();
  const api = await freePort(host);
  const peer = await freePort(host);
  const metrics = await freePort(host);
  const http = await freePort(host);
  const first = await startOnce(home, host, api, peer, metrics, http);
  t.match(first.out, /3 nodes ready, 16 data groups/, 'reports ready');
  t.match(first.out, `metrics http://${host}:${metrics + 1}/metrics`, 'prints the endpoints');
  t.match(first.out, /npm run tickctl -- sink --secret whsec_/, 'suggests the demo sink');
  t.match(first.out, /jobs create hello .*--url http:\/\/127\.0\.0\.1:8080\/hook/);
  t.equal(first.readyz, 200, "n3's /readyz answers 200");
  t.match(first.out, `http http://${host}:${http + 1}`, 'prints the HTTP API addresses');
  t.equal(first.httpStatus, 200, "n3's HTTP API answers with the admin token");
  const leads = [...first.out.matchAll(/leads (\d+) groups/g)].map((m) => Number(m[1]));
  t.equal(
    leads.reduce((a, b) => a + b, 0),
    17,
    'every group has a leader',
  );
  t.ok(Math.max(...leads) - Math.min(...leads) <= 2, `leaders balanced: ${leads.join('/')}`);
  t.equal(first.code, 0, 'exit 0 after Ctrl-C');
  const tokenFile = join(home, 'admin.token');
  t.equal(statSync(tokenFile).mode & 0o777, 0o600, 'the admin token is readable by its owner only');
  const token = readFileSync(tokenFile, 'utf8').trim();
  t.match(token, /^[0-9a-f]{64}$/, 'the admin token is 256 random bits');
  t.match(first.out, tokenFile, 'npm start says where the admin token is');
  const second = await startOnce(home, host, api, peer, metrics, http);
  t.match(second.out, /3 nodes ready/, 'a second start resumes on the same data');
  t.equal(second.code, 0);
  t.equal(readFileSync(tokenFile, 'utf8').trim(), token, 'a second start keeps the token');
});

/** Pids of every descendant of `pid` (ps's whole table, walked from the root). */
function descendants(pid: number): number[] {
  const rows = execFileSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number) as [number, number]);
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const [child, parent] of rows)
      if (parent === p) {
        out.push(child);
        walk(child);
      }
  };
  walk(pid);
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test(
  'npm start is a supervisor: one per data dir, and SIGTERM to npm stops it all',
  async (t) => {
    const home = mkdtempSync(join(tmpdir(), 'tickraft-start-'));
    const host = randomLoopbackHost();
    const env = {
      ...process.env,
      TICKRAFT_HOME: home,
      TICKRAFT_HOST: host,
      TICKRAFT_API_PORT: String(await freePort(host)),
      TICKRAFT_PEER_PORT: String(await freePort(host)),
      TICKRAFT_METRICS_PORT: String(await freePort(host)),
    };
    const npm = spawn(...withoutTapLoaderCommand('npm', ['start'], env), {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout.on('data', (d: Buffer) => (out += d.toString()));
    npm.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
    let tree: number[] = [];
    t.teardown(() => {
      for (const pid of [npm.pid!, ...tree]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(home, { recursive: true, force: true });
    });
    const deadline = Date.now() + 90_000;
    while (
      !out.includes('Ctrl-C stops the cluster') &&
      Date.now() < deadline &&
      npm.exitCode === null
    )
      await new Promise((r) => setTimeout(r, 100));
    t.match(out, /3 nodes ready/, 'the first start is ready');
    tree = descendants(npm.pid!);
    const pidText = readFileSync(join(home, 'start.pid'), 'utf8');

    const second = spawnSync(...withoutTapLoaderCommand('npm', ['start'], env), {
      cwd: ROOT,
      env,
      encoding: 'utf8',
      timeout: 60_000,
    });
    t.not(second.status, 0, 'a second start is refused');
    const firstPid = Number(pidText.trim());
    t.match(second.stderr, `already running from ${home} (supervisor pid ${firstPid})`);
    t.notMatch(second.stdout, /nodes ready/, 'and prints no status of its own');
    t.equal(
      readFileSync(join(home, 'start.pid'), 'utf8'),
      pidText,
      "the first's pid file is intact",
    );
    t.ok(tree.every(alive), 'every process of the first start still runs');
    const rolling = spawnSync(...withoutTapLoaderCommand('npm', ['run', 'rolling-restart'], env), {
      cwd: ROOT,
      env,
      encoding: 'utf8',
      timeout: 180_000,
    });
    t.equal(rolling.status, 0, 'rolling-restart still finds the first start', {
      out: rolling.stdout + rolling.stderr,
    });
    tree = descendants(npm.pid!);
    // Only what the nodes log after the SIGTERM counts: the rolling restart logged 'stopped' too.
    const logLength = new Map(
      ['n1', 'n2', 'n3'].map((id) => [id, readFileSync(join(home, `${id}.log`)).length]),
    );

    npm.kill('SIGTERM');
    const code = await exited;
    t.equal(code, 0, 'npm exits 0');
    const bound = Date.now() + 20_000;
    while (tree.some(alive) && Date.now() < bound) await new Promise((r) => setTimeout(r, 100));
    t.same(tree.filter(alive), [], 'no process of the cluster is left');
    t.match(
      out,
      /stopping: each node hands its leaderships over/,
      'the supervisor stops gracefully',
    );
    t.match(out, /stopped; the data stays in /, 'and says when every node has exited');
    for (const id of ['n1', 'n2', 'n3'])
      t.match(
        readFileSync(join(home, `${id}.log`))
          .subarray(logLength.get(id))
          .toString(),
        /"msg":"stopped"/,
        `${id} stopped after the SIGTERM`,
      );
  },
);
