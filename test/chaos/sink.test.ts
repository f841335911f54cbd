// The chaos sink as a process: every request becomes a delivery record (before the answer), the
// term fencing rule refuses an older term and a token already accepted, and the seeded answers
// are 503 or slow as asked.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import type { DeliveryRecord } from '../../chaos/history/format.js';
import { compileSigningKeys, signWebhook } from '../../src/delivery/signing.js';
import { TOKENS_PER_TERM } from '../../src/scheduler/fencing.js';
import { TEST_SECRET } from '../helpers/webhook-sink.js';

const SINK = fileURLToPath(new URL('../../chaos/sink.ts', import.meta.url));

async function startSink(t: Test, extra: string[]): Promise<{ url: string; history: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-sink-'));
  const history = join(dir, 'sink.jsonl');
  const proc = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      SINK,
      '--history',
      history,
      '--started-at',
      String(Date.now()),
      '--secret',
      TEST_SECRET,
      ...extra,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.teardown(() => {
    proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.on('exit', (code) => reject(new Error(`sink exited ${code}`)));
  });
  return { url, history };
}

const keys = compileSigningKeys([TEST_SECRET]);

async function deliver(
  url: string,
  jobId: string,
  slotMs: number,
  token: number,
  attempt = 1,
): Promise<number> {
  const fireId = `${jobId}:${slotMs}`;
  const body = JSON.stringify({ jobId, slotMs, fireId, attempt, fencingToken: token, payload: {} });
  const timestampSec = Math.floor(Date.now() / 1000);
  const res = await fetch(`${url}/hook`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': fireId,
      'tickraft-fencing-token': String(token),
      'tickraft-attempt': String(attempt),
      'webhook-id': fireId,
      'webhook-timestamp': String(timestampSec),
      'webhook-signature': signWebhook({ id: fireId, timestampSec, body }, keys),
    },
    body,
  });
  await res.text();
  return res.status;
}

function records(path: string): DeliveryRecord[] {
  return readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as DeliveryRecord);
}

t.test('records every request and fences by term', async (t) => {
  const { url, history } = await startSink(t, ['--error-fraction', '0', '--slow-fraction', '0']);
  const term = (n: number, k = 0): number => n * TOKENS_PER_TERM + k;
  t.equal(await deliver(url, 'j1', 1000, term(3, 1)), 200, 'first token accepted');
  t.equal(
    await deliver(url, 'j1', 2000, term(3, 0)),
    200,
    'a lower token of the same term: accepted',
  );
  t.equal(await deliver(url, 'j1', 2000, term(3, 0), 2), 409, 'a token already accepted: refused');
  t.equal(await deliver(url, 'j1', 3000, term(2, 9)), 409, 'an older term: refused');
  t.equal(await deliver(url, 'j1', 3000, term(4, 0)), 200, 'a newer term: accepted');
  t.equal(await deliver(url, 'j2', 1000, term(1, 0)), 200, 'fences are per job');
  const r = records(history);
  t.same(
    r.map((d) => [d.jobId, d.slotMs, d.answer, d.status]),
    [
      ['j1', 1000, '2xx', 200],
      ['j1', 2000, '2xx', 200],
      ['j1', 2000, 'stale', 409],
      ['j1', 3000, 'stale', 409],
      ['j1', 3000, '2xx', 200],
      ['j2', 1000, '2xx', 200],
    ],
  );
  t.ok(r.every((d) => d.signatureOk === true && d.fireId === `${d.jobId}:${d.slotMs}`));
  t.ok(
    r.every((d, i) => i === 0 || d.t >= r[i - 1]!.t),
    'receipt times on the run time base, in order',
  );
});

t.test('seeded errors and slow answers', async (t) => {
  const { url, history } = await startSink(t, [
    '--error-fraction',
    '0.5',
    '--slow-fraction',
    '0.5',
    '--slow-ms',
    '200',
  ]);
  const statuses: number[] = [];
  for (let i = 1; i <= 10; i++)
    statuses.push(await deliver(url, 'j', i * 1000, TOKENS_PER_TERM + i));
  const r = records(history);
  const slow = r.filter((d) => d.answer === 'slow');
  const errors = r.filter((d) => d.answer === '5xx');
  t.equal(slow.length + errors.length, 10, 'every answer is an error or slow');
  t.ok(slow.length > 0 && errors.length > 0, `${errors.length} errors, ${slow.length} slow`);
  t.ok(slow.every((d) => d.status === 200 && (d.heldMs ?? 0) >= 100));
  t.same(statuses.filter((s) => s === 503).length, errors.length);
});
