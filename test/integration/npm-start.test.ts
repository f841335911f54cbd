// `npm start` as a newcomer runs it: three nodes come up and report ready with balanced
// leaders, print their endpoints (metrics too, where /readyz answers 200) and a first session
// with the demo sink, Ctrl-C (SIGINT) stops everything with exit 0 and no node left running,
// and a second start resumes on the same data. Runs cluster/start.ts with ports and data dir moved aside.
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, randomLoopbackHost } from '../helpers/cluster.js';

const START = fileURLToPath(new URL('../../cluster/start.ts', import.meta.url));

async function startOnce(
  home: string,
  host: string,
  api: number,
  peer: number,
  metrics: number,
): Promise<{ out: string; code: number | null; readyz: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', START], {
    env: {
      ...process.env,
      TICKRAFT_HOME: home,
      TICKRAFT_HOST: host,
      TICKRAFT_API_PORT: String(api),
      TICKRAFT_PEER_PORT: String(peer),
      TICKRAFT_METRICS_PORT: String(metrics),
    },
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
  child.kill('SIGINT');
  const code = await exited;
  return { out, code, readyz };
}

t.test('npm start brings up 3 nodes, stops on Ctrl-C, and resumes', async (t) => {
  const home = mkdtempSync(join(tmpdir(), 'tickraft-start-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  // Port bases; the two ports after each are assumed free as well (ephemeral ports are sparse).
  const host = randomLoopbackHost();
  const api = await freePort(host);
  const peer = await freePort(host);
  const metrics = await freePort(host);
  const first = await startOnce(home, host, api, peer, metrics);
  t.match(first.out, /3 nodes ready, 16 data groups/, 'reports ready');
  t.match(first.out, `metrics http://${host}:${metrics + 1}/metrics`, 'prints the endpoints');
  t.match(first.out, /npm run tickctl -- sink --secret whsec_/, 'suggests the demo sink');
  t.match(first.out, /jobs create hello .*--url http:\/\/127\.0\.0\.1:8080\/hook/);
  t.equal(first.readyz, 200, "n3's /readyz answers 200");
  const leads = [...first.out.matchAll(/leads (\d+) groups/g)].map((m) => Number(m[1]));
  t.equal(
    leads.reduce((a, b) => a + b, 0),
    17,
    'every group has a leader',
  );
  t.ok(Math.max(...leads) - Math.min(...leads) <= 2, `leaders balanced: ${leads.join('/')}`);
  t.equal(first.code, 0, 'exit 0 after Ctrl-C');
  const second = await startOnce(home, host, api, peer, metrics);
  t.match(second.out, /3 nodes ready/, 'a second start resumes on the same data');
  t.equal(second.code, 0);
});
