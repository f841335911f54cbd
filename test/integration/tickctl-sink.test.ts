// `tickctl sink` as a process: it prints each fire it receives (job, fire id, slot, lag,
// attempt, token) with the signature checked against --secret, flags a wrong signature, answers
// 200, and stops cleanly with exit 0 on SIGINT and on SIGTERM. A bad secret is exit 2.
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { compileSigningKeys, signWebhook } from '../../src/delivery/signing.js';
import { freePort, randomLoopbackHost } from '../helpers/cluster.js';
import { TEST_SECRET } from '../helpers/webhook-sink.js';

const TICKCTL = fileURLToPath(new URL('../../bin/tickctl', import.meta.url));

function startSink(args: string[]) {
  const child = spawn(process.execPath, [TICKCTL, 'sink', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { text: '' };
  child.stdout.on('data', (d: Buffer) => (out.text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out.text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out, exited };
}

async function waitFor(out: { text: string }, pattern: RegExp, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pattern.test(out.text)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${pattern}: ${out.text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function fireRequest(slotMs: number, secret: string) {
  const fireId = `hello:${slotMs}`;
  const body = JSON.stringify({
    jobId: 'hello',
    tenant: 'acme',
    fireId,
    slot: new Date(slotMs).toISOString(),
    slotMs,
    attempt: 1,
    fencingToken: 4294967301,
    payload: null,
  });
  const timestampSec = Math.floor(Date.now() / 1000);
  const signature = signWebhook({ id: fireId, timestampSec, body }, compileSigningKeys([secret]));
  return {
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': fireId,
      'webhook-timestamp': String(timestampSec),
      'webhook-signature': signature,
    },
  };
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  t.test(`prints signed fires and stops on ${signal}`, async (t) => {
    const host = randomLoopbackHost();
    const port = await freePort(host);
    const sink = startSink(['--listen', `${host}:${port}`, '--secret', TEST_SECRET]);
    t.teardown(() => {
      if (sink.child.exitCode === null) sink.child.kill('SIGKILL');
    });
    await waitFor(sink.out, /listening on/);
    const slotMs = Date.now() - 20;
    const res = await fetch(`http://${host}:${port}/hook`, fireRequest(slotMs, TEST_SECRET));
    t.equal(res.status, 200, 'answers 200');
    await waitFor(sink.out, /signature ok/);
    t.match(
      sink.out.text,
      new RegExp(`job hello {2}fire hello:${slotMs} {2}slot \\S+ {2}lag \\d+ms`),
    );
    t.match(sink.out.text, /attempt 1 {2}token 4294967301/);
    // A backfilled slot three hours back: its age, not a lag of ten million ms.
    const past = slotMs - 3 * 3_600_000 - 120_000;
    await fetch(`http://${host}:${port}/hook`, fireRequest(past, TEST_SECRET));
    await waitFor(sink.out, new RegExp(`fire hello:${past} `));
    t.match(
      sink.out.text,
      new RegExp(
        `fire hello:${past} {2}slot \\S+ {2}age 3h 2m \\(a backfill or catch-up\\) {2}attempt 1`,
      ),
      'a long-past slot is shown by its age',
    );
    t.notMatch(sink.out.text, /lag \d{6,}ms/, 'no huge lag number');
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const forged = await fetch(`http://${host}:${port}/hook`, fireRequest(slotMs + 1000, other));
    t.equal(forged.status, 200, 'a demo sink answers 200 whatever the signature');
    await waitFor(sink.out, /signature BAD \(no-matching-signature\)/);
    sink.child.kill(signal);
    t.equal(await sink.exited, 0, `exit 0 on ${signal}`);
    t.match(sink.out.text, new RegExp(`stopped \\(${signal}\\) after 3 request`));
  });
}

t.test('without --secret signatures are unchecked; a bad secret is exit 2', async (t) => {
  const host = randomLoopbackHost();
  const port = await freePort(host);
  const sink = startSink(['--listen', `${host}:${port}`]);
  t.teardown(() => {
    if (sink.child.exitCode === null) sink.child.kill('SIGKILL');
  });
  await waitFor(sink.out, /listening on/);
  await fetch(`http://${host}:${port}/hook`, fireRequest(Date.now(), TEST_SECRET));
  await waitFor(sink.out, /signature unchecked/);
  sink.child.kill('SIGINT');
  t.equal(await sink.exited, 0);
  const bad = startSink(['--listen', `${host}:${port}`, '--secret', 'nope']);
  t.equal(await bad.exited, 2);
  t.match(bad.out.text, /--secret must start with whsec_/);
});
