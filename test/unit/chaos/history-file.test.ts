// History files: records written by HistoryWriter read back equal and in order, a torn last line
// (the writer killed mid-record) is dropped and reported, any other bad line is an error naming
// the file, line and field; and the CLI prints the table and exits 0 / 1 / 2 as documented.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../../../src/base/errors.js';
import { encodeRecord, parseHistoryText } from '../../../chaos/history/codec.js';
import type { HistoryRecord } from '../../../chaos/history/format.js';
import { HistoryWriter, readHistoryFiles } from '../../../chaos/history/jsonl.js';
import {
  HistoryBuilder,
  START_EPOCH_MS,
  everySecond,
  readOf,
} from '../../helpers/chaos-history.js';
import { tempDir } from '../../helpers/temp-dir.js';

function cleanRecords(): HistoryRecord[] {
  const def = everySecond();
  return new HistoryBuilder()
    .create('j1', def)
    .deliverSeconds('j1', 1, 19)
    .final('j1', 20_000, readOf('j1', def), HistoryBuilder.succeeded(1, 19)).records;
}

t.test('written records read back equal, one per line, appended to what was there', (t) => {
  const dir = tempDir(t, 'history');
  const path = join(dir, 'driver.jsonl');
  const records = cleanRecords();
  const first = new HistoryWriter(path);
  for (const r of records.slice(0, 10)) first.append(r);
  first.close();
  const second = new HistoryWriter(path);
  for (const r of records.slice(10)) second.append(r);
  t.equal(second.recordCount, records.length - 10);
  second.close();
  const text = readFileSync(path, 'utf8');
  t.equal(text.split('\n').length - 1, records.length, 'one line per record');
  const read = readHistoryFiles([path]);
  t.same(read.records, records);
  t.same(read.tornFiles, []);
  t.end();
});

t.test('a torn last line is dropped and reported; a bad line elsewhere is an error', (t) => {
  const records = cleanRecords();
  const text = records.map(encodeRecord).join('');
  const torn = parseHistoryText(`${text}{"type":"delivery","t":12`);
  t.equal(torn.records.length, records.length);
  t.equal(torn.tornTail, '{"type":"delivery","t":12');

  const lines = text.split('\n');
  lines.splice(3, 0, '{"type":"delivery"');
  t.throws(() => parseHistoryText(lines.join('\n'), 'h.jsonl'), {
    code: 'CHAOS_INVALID_HISTORY',
    message: /h\.jsonl:4: is not valid JSON/,
  });
  t.end();
});

t.test('records of the wrong shape are refused with the field named', (t) => {
  const bad = [
    JSON.stringify({ ...cleanRecords()[0]!, formatVersion: 2 }),
    JSON.stringify({
      type: 'delivery',
      t: 5,
      fireId: 'j1:1',
      jobId: 'j1',
      slotMs: 1.5,
      attempt: 1,
      token: 3,
      answer: 'ok',
      status: 200,
    }),
    JSON.stringify({ type: 'invoke', t: 1, process: 1, opId: 1, f: 'create', jobId: 'j1' }),
    JSON.stringify({ type: 'teleport', t: 1 }),
  ].join('\n');
  try {
    parseHistoryText(`${bad}\n`, 'x');
    t.fail('expected a ValidationError');
  } catch (err) {
    t.type(err, ValidationError);
    const fields = (err as ValidationError).violations.map((v) => v.field);
    t.same(fields, ['x:1.formatVersion', 'x:2.slotMs', 'x:2.answer', 'x:3.definition', 'x:4.type']);
  }
  t.end();
});

t.test(
  'chaos:check prints the table and exits 0 when clean, 1 on a violation, 2 when unreadable',
  (t) => {
    const dir = tempDir(t, 'check-cli');
    const driver = join(dir, 'driver.jsonl');
    const sink = join(dir, 'sink.jsonl');
    const records = cleanRecords();
    writeFileSync(
      driver,
      records
        .filter((r) => r.type !== 'delivery')
        .map(encodeRecord)
        .join(''),
    );
    writeFileSync(
      sink,
      records
        .filter((r) => r.type === 'delivery')
        .map(encodeRecord)
        .join(''),
    );
    const run = (...args: string[]): ReturnType<typeof spawnSync> =>
      spawnSync(process.execPath, ['--import', 'tsx', 'chaos/check.ts', ...args], {
        encoding: 'utf8',
        timeout: 120_000,
      });

    const ok = run(driver, sink);
    t.equal(ok.status, 0, String(ok.stderr));
    t.match(String(ok.stdout), /chaos check: OK/);
    t.match(String(ok.stdout), /slots owed\s+15/);

    const json = run(driver, sink, '--json');
    t.equal(json.status, 0);
    t.equal((JSON.parse(String(json.stdout)) as { verdict: string }).verdict, 'ok');

    // The sink saw a slot of the job twice without any fault: an at-least-once duplicate.
    appendFileSync(
      sink,
      encodeRecord({
        type: 'delivery',
        t: 5_600,
        fireId: `j1:${START_EPOCH_MS + 5000}`,
        jobId: 'j1',
        slotMs: START_EPOCH_MS + 5000,
        attempt: 2,
        token: 5_000,
        answer: '2xx',
        status: 200,
      }),
    );
    const failed = run(driver, sink);
    t.equal(failed.status, 1);
    t.match(String(failed.stdout), /chaos check: VIOLATIONS/);
    t.match(String(failed.stdout), /at-least-once-duplicate: 1/);

    writeFileSync(join(dir, 'bad.jsonl'), 'nonsense\n');
    const bad = run(join(dir, 'bad.jsonl'));
    t.equal(bad.status, 2);
    t.match(String(bad.stderr), /bad\.jsonl:1: is not valid JSON/);
    t.end();
  },
);
