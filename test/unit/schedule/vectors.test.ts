// Conformance: the spec's vectors (test/fixtures/cron-vectors.jsonl, a byte copy of
// ../shared/spec/cron-vectors.jsonl) are reproduced exactly. Each line is parsed with its zone
// and anchor, and nextFires(start, n) is compared with the expected instants, or the expression
// must be rejected; one assertion per vector, named by its note and expression. A second test
// fails when the copy drifts from the shared original, whenever that file is present.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { formatInstant } from '../../../src/schedule/civil.js';
import { parseInstant } from '../../../src/schedule/iso.js';
import { nextFires } from '../../../src/schedule/next-fire.js';
import { tryParseSchedule } from '../../../src/schedule/parse.js';

interface Vector {
  readonly expr: string;
  readonly tz: string;
  readonly start: string;
  readonly n: number;
  readonly fires: readonly string[];
  readonly anchor?: string;
  readonly error?: boolean;
  readonly note?: string;
}

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const fixturePath = `${repoRoot}test/fixtures/cron-vectors.jsonl`;
const sharedPath = `${repoRoot}../shared/spec/cron-vectors.jsonl`;

function instant(text: string): number {
  const result = parseInstant(text);
  if (!result.ok) throw new Error(`vector instant ${text}: ${JSON.stringify(result.problems)}`);
  return result.ms;
}

const vectors: Vector[] = readFileSync(fixturePath, 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line) as Vector);

const sharedSkip = existsSync(sharedPath)
  ? false
  : `shared vectors not found at ${sharedPath}: nothing to compare the fixture with`;

t.test('the fixture is a byte copy of the shared vectors', { skip: sharedSkip }, (t) => {
  const copy = readFileSync(fixturePath);
  const shared = readFileSync(sharedPath);
  t.ok(copy.equals(shared), `${fixturePath} must equal ${sharedPath}: copy the file again`);
  t.end();
});

t.test('every conformance vector is reproduced', (t) => {
  t.ok(vectors.length >= 65, `the fixture holds the vectors (${vectors.length})`);
  for (const v of vectors) {
    const anchorMs = v.anchor === undefined ? undefined : instant(v.anchor);
    const parsed = tryParseSchedule(v.expr, { timezone: v.tz, anchorMs });
    const actual = parsed.ok
      ? nextFires(parsed.schedule, instant(v.start), v.n).map(formatInstant)
      : 'rejected';
    const expected = v.error === true ? 'rejected' : v.fires;
    t.same(actual, expected, `${v.note ?? ''}: '${v.expr}' in ${v.tz} after ${v.start}`);
  }
  t.end();
});
