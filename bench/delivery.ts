/**
 * `npx tsx bench/delivery.ts`: figures for webhook delivery, printed with the machine's context
 * and never asserted. A node:http sink in a child process answers every POST with `200 ok`
 * (keep-alive). The client keeps IN_FLIGHT requests going for BENCH_MS after a warm-up:
 * (1) a bare undici Pool (connections = IN_FLIGHT, pipelining 1) posting a 200-byte JSON body,
 * the floor; (2) deliverWebhook through OriginPools with one signing secret and (3) with two
 * (a rotation): the same traffic plus validation, body building, signing, the deadline timer and
 * the excerpt. Then two in-process costs: buildWebhookRequest alone, and FairQueue
 * push + take + done with 1,000 tenants. CPU µs per request is this process only (all threads).
 */
import { startSinkProcess } from './sink-process.js';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { Pool } from 'undici';
import { FairQueue } from '../src/delivery/fair-queue.js';
import { OriginPools } from '../src/delivery/origin-pools.js';
import { compileSigningKeys, type SigningKeys } from '../src/delivery/signing.js';
import { TargetPolicy } from '../src/delivery/target-policy.js';
import {
  buildWebhookRequest,
  deliverWebhook,
  type WebhookAttempt,
} from '../src/delivery/webhook.js';

const DURATION_MS = Number(process.env['BENCH_MS'] ?? 3000);
const WARMUP_MS = 500;
const IN_FLIGHT = Number(process.env['BENCH_IN_FLIGHT'] ?? 64);

const SINK_SOURCE = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => { res.writeHead(200, { 'content-length': '2' }); res.end('ok'); });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

function startSink(): ReturnType<typeof startSinkProcess> {
  return startSinkProcess(SINK_SOURCE);
}

interface Figures {
  perSec: number;
  cpuMicrosPerReq: number;
  errors: number;
}

/** Runs `one` from IN_FLIGHT concurrent loops for `ms`; counts completions and non-successes. */
async function drive(one: () => Promise<boolean>, ms: number): Promise<Figures> {
  let done = 0;
  let errors = 0;
  const cpuStart = process.cpuUsage();
  const start = performance.now();
  const end = start + ms;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      if (await one()) done++;
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, loop));
  const elapsedMs = performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  return {
    perSec: (done / elapsedMs) * 1000,
    cpuMicrosPerReq: (cpu.user + cpu.system) / Math.max(1, done + errors),
    errors,
  };
}

function print(name: string, f: Figures): void {
  console.log(
    `${name.padEnd(34)} ${Math.round(f.perSec).toLocaleString('en').padStart(8)} req/s, ` +
      `${f.cpuMicrosPerReq.toFixed(1)} CPU µs/req (client), errors ${f.errors}`,
  );
}

function attemptFor(url: string, signing: SigningKeys, i: number): WebhookAttempt {
  const slotMs = 1_700_000_000_000 + i;
  return {
    job: {
      id: 'bench/bench-job', // the job's key (the body names it bench-job)
      tenant: 'bench',
      target: { url, headers: { 'X-Team': 'bench' } },
      payload: '{"report":"daily","region":"eu-west-1","items":[1,2,3]}',
      attemptDeadlineMs: 10_000,
    },
    fireId: `bench/bench-job:${slotMs}`,
    slotMs,
    attempt: 1,
    token: 16_777_216 + i,
    signing,
    nowMs: slotMs,
  };
}

async function benchHttp(origin: string): Promise<void> {
  const body = JSON.stringify({ jobId: 'bench-job', payload: 'x'.repeat(150) });
  const pool = new Pool(origin, { connections: IN_FLIGHT, pipelining: 1 });
  const bare = async (): Promise<boolean> => {
    const res = await pool.request({
      path: '/hook',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await res.body.dump();
    return res.statusCode === 200;
  };
  await drive(bare, WARMUP_MS);
  print(`bare Pool.request (${body.length} B body)`, await drive(bare, DURATION_MS));
  await pool.close();

  for (const secretCount of [1, 2]) {
    const secrets = Array.from(
      { length: secretCount },
      (_, i) => `whsec_${Buffer.alloc(32, i + 1).toString('base64')}`,
    );
    const signing = compileSigningKeys(secrets);
    // The bench's sink listens on loopback, which the default target policy refuses.
    const pools = new OriginPools({
      connectionsPerOrigin: IN_FLIGHT,
      targetPolicy: TargetPolicy.of(['127.0.0.0/8']),
    });
    let i = 0;
    const viaWebhook = async (): Promise<boolean> => {
      const report = await deliverWebhook(attemptFor(`${origin}/hook`, signing, i++), { pools });
      return report.outcome === 'success';
    };
    await drive(viaWebhook, WARMUP_MS);
    const size = buildWebhookRequest(attemptFor(`${origin}/hook`, signing, 0));
    const bytes = size.ok ? Buffer.byteLength(size.request.body) : 0;
    print(
      `deliverWebhook, ${secretCount} secret${secretCount > 1 ? 's' : ''} (${bytes} B body)`,
      await drive(viaWebhook, DURATION_MS),
    );
    await pools.close();
  }
}

function benchInProcess(): void {
  const signing = compileSigningKeys([`whsec_${Buffer.alloc(32, 1).toString('base64')}`]);
  const n = 200_000;
  let start = performance.now();
  for (let i = 0; i < n; i++)
    buildWebhookRequest(attemptFor('https://hooks.example.com/a', signing, i));
  let ms = performance.now() - start;
  console.log(
    `buildWebhookRequest (validate, body, sign): ${((ms * 1000) / n).toFixed(2)} µs each, ` +
      `${Math.round((n / ms) * 1000).toLocaleString('en')}/s`,
  );

  interface Item {
    tenant: string;
    origin: string;
    priority: number;
  }
  const q = new FairQueue<Item>({
    queuedMax: 100_000,
    tenantInflightMax: 8,
    originInflightMax: 8,
  });
  const items: Item[] = Array.from({ length: n }, (_, i) => ({
    tenant: `t${i % 1000}`,
    origin: `https://o${i % 1500}.example.com`,
    priority: i % 4,
  }));
  start = performance.now();
  let next = 0;
  const inflight: Item[] = [];
  while (next < n || inflight.length > 0) {
    while (next < n && q.queuedCount < 10_000) q.push(items[next++] as Item);
    for (let it = q.take(); it !== undefined && inflight.length < 4_000; it = q.take()) {
      inflight.push(it);
    }
    // Finish the oldest half of what is in flight, as completions would.
    for (const it of inflight.splice(0, Math.ceil(inflight.length / 2))) q.done(it);
  }
  ms = performance.now() - start;
  console.log(
    `FairQueue push+take+done, 1,000 tenants: ${((ms * 1000) / n).toFixed(2)} µs per item, ` +
      `${Math.round((n / ms) * 1000).toLocaleString('en')} items/s`,
  );
}

function version(pkg: string): string {
  const url = new URL(`../node_modules/${pkg}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

const cpu = os.cpus()[0];
console.log(
  `machine: ${os.cpus().length} × ${cpu?.model ?? 'unknown cpu'}, ` +
    `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, undici ${version('undici')}`,
);
console.log(
  `network: loopback; sink in a child process (the two share the machine's cores); ` +
    `${IN_FLIGHT} in flight, ${DURATION_MS} ms per case after ${WARMUP_MS} ms warm-up`,
);
const sink = await startSink();
try {
  await benchHttp(sink.origin);
} finally {
  sink.child.kill();
}
benchInProcess();
