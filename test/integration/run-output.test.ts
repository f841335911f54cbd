// Run output with real processes (docs/API.md, "Run output"): a 3-node cluster with the default
// bounds (64 KiB per attempt), `tickctl runs logs` and `tickctl worker` as users run them.
// - A webhook answering 100 KiB: `runs logs` prints the first 64 KiB and says it was cut, while
//   the run's attempt record keeps its 512-byte excerpt.
// - A worker run by the real `tickctl worker` whose shell command prints a line every 0.25 s for
//   3 s: `runs logs --follow` prints lines while the run is still RUNNING, and exits 0 once the
//   attempt ended, with every line.
// - CompleteRun with a 3,000-character output: the record keeps 1,024 characters and names the
//   node that served the call, which answers the rest.
// - Last, the node that sent the webhook is killed: `runs logs` falls back to the replicated
//   excerpt, saying so (source excerpt).
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';
import { eventually, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import { nodeCommand } from '../helpers/node-child.js';
import { runTickctl, TICKCTL } from '../helpers/tickctl.js';

type Obj = Record<string, unknown>;

/** A schedule with no slot during the test: runs come from triggers. */
const YEARLY = '0 0 1 1 *';
const BIG = '0123456789abcde\n'.repeat(6400); // 100 KiB

/** A receiver answering `/big` with 100 KiB and `/accept` with 202 (completed later). */
async function receiver(t: Test): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/accept') res.writeHead(202).end('accepted, working on it');
      else res.writeHead(200, { 'content-type': 'text/plain' }).end(BIG);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test(
  'run output: webhook body, a streaming worker followed live, CompleteRun, a lost node',
  async (t) => {
    const startedMs = Date.now();
    const ac = await ApiCluster.start(t, { groups: 2 });
    const url = await receiver(t);
    const [n1, n2, n3] = ac.cluster.nodes;
    const c = ac.client('n1');
    const env = { ...process.env, TICKRAFT_TOKEN: TEST_ADMIN_TOKEN };
    const tickctl = (args: string[], via = n1!): ReturnType<typeof runTickctl> =>
      runTickctl([...args, '--endpoint', endpointOf(via)], { env, t });
    const trigger = async (jobId: string): Promise<string> => {
      const res = await c.call<Obj>('JobService', 'TriggerJob', { tenant: TENANT, jobId });
      return (res['run'] as Obj)['fireId'] as string;
    };
    const runOf = (fireId: string, via = c): Promise<Obj> =>
      via.call<Obj>('RunService', 'GetRun', { tenant: TENANT, fireId });
    const until = (fireId: string, status: string, withinMs = 20_000): Promise<Obj> =>
      eventually(async () => {
        const r = await runOf(fireId);
        if (r['status'] !== `RUN_STATUS_${status}`)
          throw new Error(`${fireId} is ${String(r['status'])}`);
        return r;
      }, withinMs);

    // --- A webhook answering 100 KiB.
    await c.call('JobService', 'CreateJob', {
      jobId: 'big',
      spec: { tenant: TENANT, schedule: YEARLY, target: { url: `${url}/big` } },
    });
    const bigFire = await trigger('big');
    const bigRun = await until(bigFire, 'SUCCEEDED');
    const bigAttempt = (bigRun['attempts'] as Obj[])[0]!;
    t.equal(
      bigAttempt['responseExcerpt'],
      BIG.slice(0, 512),
      'the record keeps a 512-byte excerpt',
    );
    const sender = bigAttempt['nodeId'] as string;
    t.ok(['n1', 'n2', 'n3'].includes(sender), `sent by ${sender}`);
    const logs = await tickctl(['runs', 'logs', bigFire, '--tenant', TENANT]);
    t.equal(logs.code, 0, logs.stderr);
    t.equal(logs.stdout, `${BIG.slice(0, 64 * 1024)}`, 'runs logs prints the first 64 KiB');
    t.match(logs.stderr, `attempt 1 (ended): output kept by node ${sender}, cut at that node's`);
    const api = await c.call<Obj>('RunService', 'GetRunOutput', {
      tenant: TENANT,
      fireId: bigFire,
    });
    t.match(api, { attempt: 1, complete: true, truncated: true, source: 'node', nodeId: sender });
    t.equal(Buffer.byteLength(api['output'] as string), 64 * 1024);
    t.equal(api['nextOffset'], 64 * 1024);
    const rest = await c.call<Obj>('RunService', 'GetRunOutput', {
      tenant: TENANT,
      fireId: bigFire,
      offset: 65_000,
    });
    t.match(rest, { output: BIG.slice(65_000, 65_536), nextOffset: 65_536 }, 'read from an offset');

    // --- A worker streaming its command's output, followed live.
    const n0 = n1!;
    const script =
      'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "line $i of $TICKRAFT_JOB_ID"; sleep 0.25; done';
    const worker = spawn(
      ...nodeCommand(
        [TICKCTL, 'worker', '--endpoint', endpointOf(n0), '--pool', 'logs', '--exec', script],
        env,
      ),
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    t.teardown(() => {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    });
    let workerText = '';
    worker.stdout.setEncoding('utf8').on('data', (s: string) => (workerText += s));
    worker.stderr.setEncoding('utf8').on('data', (s: string) => (workerText += s));
    await eventually(() => {
      if (!/serving pool logs with capacity 1 per node on (\S+, ){2}\S+;/.test(workerText))
        return Promise.reject(new Error(`worker not serving yet: ${workerText}`));
      return Promise.resolve();
    }, 20_000);
    await c.call('JobService', 'CreateJob', {
      jobId: 'streamer',
      spec: { tenant: TENANT, schedule: YEARLY, target: { url: 'worker:logs' } },
    });
    const streamFire = await trigger('streamer');
    await until(streamFire, 'RUNNING');
    const followStart = Date.now();
    const follow = spawn(
      ...nodeCommand(
        [
          ...[TICKCTL, 'runs', 'logs', streamFire, '--tenant', TENANT, '--follow'],
          ...['--endpoint', endpointOf(n2!)],
        ],
        env,
      ),
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    t.teardown(() => {
      if (follow.exitCode === null && follow.signalCode === null) follow.kill('SIGKILL');
    });
    const arrivals: { atMs: number; text: string }[] = [];
    let followErr = '';
    follow.stdout
      .setEncoding('utf8')
      .on('data', (s: string) => arrivals.push({ atMs: Date.now(), text: s }));
    follow.stderr.setEncoding('utf8').on('data', (s: string) => (followErr += s));
    const followCode = await new Promise<number | null>((resolve) => follow.on('close', resolve));
    const exitedMs = Date.now();
    const printed = arrivals.map((a) => a.text).join('');
    t.equal(followCode, 0, `--follow exits 0 once the attempt ended (${followErr})`);
    const lines = Array.from({ length: 12 }, (_, i) => `line ${i + 1} of streamer\n`).join('');
    t.equal(printed, lines, 'every line, in order, once');
    const firstLine = arrivals.find((a) => a.text.includes('line 1 of'))!;
    const lastLine = arrivals.find((a) => a.text.includes('line 12 of'))!;
    t.ok(
      lastLine.atMs - firstLine.atMs >= 1000,
      `lines arrived as the command printed them: line 1 after ${firstLine.atMs - followStart} ms, line 12 after ${lastLine.atMs - followStart} ms`,
    );
    const streamed = await runOf(streamFire);
    const attempt = (streamed['attempts'] as Obj[]).at(-1)!;
    t.equal(streamed['status'], 'RUN_STATUS_SUCCEEDED');
    const endedMs = (attempt['startedAtMs'] as number) + (attempt['durationMs'] as number);
    t.ok(
      firstLine.atMs < endedMs - 500,
      `line 1 was shown ${endedMs - firstLine.atMs} ms before the run finished`,
    );
    t.ok(exitedMs - endedMs < 3000, `--follow exited ${exitedMs - endedMs} ms after the run ended`);
    t.match(followErr, /attempt 1 \(ended\): output kept by node n\d/);
    t.equal(attempt['responseExcerpt'], lines, "the record's excerpt: the first 1 KiB of stdout");

    // --- CompleteRun's output: on the node that served it, the record naming that node.
    await c.call('JobService', 'CreateJob', {
      jobId: 'async',
      spec: {
        tenant: TENANT,
        schedule: YEARLY,
        target: { url: `${url}/accept`, completionTimeoutMs: 60_000 },
      },
    });
    const asyncFire = await trigger('async');
    // RUNNING shows while the request is in flight too: wait for the 202 to be recorded.
    const accepted = await eventually(async () => {
      const r = await runOf(asyncFire);
      const first = (r['attempts'] as Obj[] | undefined)?.[0];
      if (first?.['outcome'] !== 'ATTEMPT_OUTCOME_ACCEPTED')
        throw new Error(`${asyncFire}: its 202 is not recorded yet`);
      return r;
    }, 20_000);
    const token = (accepted['attempts'] as Obj[])[0]!['fencingToken'] as number;
    const early = await c.call<Obj>('RunService', 'GetRunOutput', {
      tenant: TENANT,
      fireId: asyncFire,
    });
    t.match(
      early,
      { output: 'accepted, working on it', complete: false, source: 'node' },
      '202 body',
    );
    const long = 'résultat '.repeat(333) + '!'; // 2,998 characters, 3,331 bytes
    await c.call('RunService', 'CompleteRun', {
      tenant: TENANT,
      fireId: asyncFire,
      fencingToken: token,
      outcome: 'ATTEMPT_OUTCOME_SUCCESS',
      output: long,
    });
    const completed = await runOf(asyncFire);
    const done = (completed['attempts'] as Obj[])[0]!;
    t.equal(done['responseExcerpt'], long.slice(0, 1024), 'the record keeps 1,024 characters');
    const server = done['outputNodeId'] as string;
    t.ok(server !== '', `the record names the node that served the completion (${server})`);
    const full = await ac
      .client('n3')
      .call<Obj>('RunService', 'GetRunOutput', { tenant: TENANT, fireId: asyncFire });
    t.match(full, {
      output: long,
      complete: true,
      truncated: false,
      source: 'node',
      nodeId: server,
    });

    // --- The node that sent the webhook dies: what it held is gone, the excerpt is left.
    const victim = ac.cluster.nodes.find((n) => n.id === sender)!;
    const survivor = [n1!, n2!, n3!].find((n) => n.id !== sender)!;
    await victim.kill9();
    const fallback = await eventually(async () => {
      const r = await tickctl(['runs', 'logs', bigFire, '--tenant', TENANT], survivor);
      if (r.code !== 0) throw new Error(`runs logs: ${r.code} ${r.stderr}`);
      return r;
    }, 20_000);
    t.equal(fallback.stdout, `${BIG.slice(0, 512)}`, 'the 512-byte excerpt');
    t.match(fallback.stderr, `the attempt record's excerpt only: node ${sender} does not have`);
    const viaApi = await eventually(
      () =>
        ac
          .client(survivor.id)
          .call<Obj>('RunService', 'GetRunOutput', { tenant: TENANT, fireId: bigFire }),
      10_000,
    );
    t.match(viaApi, { source: 'excerpt', nodeId: sender, complete: true, truncated: false });
    t.equal(viaApi['output'], BIG.slice(0, 512));
    worker.kill('SIGTERM');
    t.comment(`run output test: ${Date.now() - startedMs} ms`);
  },
);
