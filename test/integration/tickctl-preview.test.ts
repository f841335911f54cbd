// `tickctl preview` as a user runs it: the real bin/tickctl launcher in a child process (no build
// step, TypeScript through tsx), with a host TZ unlike any zone in the tests to show the host
// zone plays no part. Checks stdout lines, --json, the default --from, running from another
// directory, and for bad input the exit code 2 and a stderr that names every field at fault
// with its position. Each child is killed at teardown if it is still running.
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const launcher = `${repoRoot}bin/tickctl`;
const CHILD_TIMEOUT_MS = 60_000;

interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function tickctl(
  test: { teardown: (fn: () => void) => void },
  args: readonly string[],
  cwd = repoRoot,
): Promise<CliResult> {
  const child = spawn(process.execPath, [launcher, ...args], {
    cwd,
    env: { ...process.env, TZ: 'Asia/Kathmandu' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), CHILD_TIMEOUT_MS);
  test.teardown(() => {
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('prints one UTC instant per line', async (t) => {
  const result = await tickctl(t, [
    'preview',
    '30 2 * * *',
    '--tz',
    'America/New_York',
    '--from',
    '2025-03-08T12:00:00Z',
    '--count',
    '3',
  ]);
  t.same(result, {
    code: 0,
    stdout: '2025-03-09T07:00:00.000Z\n2025-03-10T06:30:00.000Z\n2025-03-11T06:30:00.000Z\n',
    stderr: '',
  });
});

t.test('--json prints an array; --anchor places an interval', async (t) => {
  const result = await tickctl(t, [
    'preview',
    'every 90s',
    '--from',
    '2025-01-01T00:02:00Z',
    '--anchor',
    '2025-01-01T00:00:00Z',
    '--count',
    '4',
    '--json',
  ]);
  t.equal(result.code, 0);
  t.same(JSON.parse(result.stdout), [
    '2025-01-01T00:03:00.000Z',
    '2025-01-01T00:04:30.000Z',
    '2025-01-01T00:06:00.000Z',
    '2025-01-01T00:07:30.000Z',
  ]);
});

t.test('--from defaults to now, and the launcher works from any directory', async (t) => {
  const before = Date.now();
  const result = await tickctl(t, ['preview', '* * * * * *', '--count', '2'], tmpdir());
  t.equal(result.code, 0, result.stderr);
  const lines = result.stdout.trim().split('\n').map(Date.parse);
  t.equal(lines.length, 2);
  t.ok((lines[0] ?? 0) > before - 1000 && (lines[0] ?? 0) < Date.now() + 2000, 'next second');
});

t.test('invalid input: exit 2 and every violation on stderr with its position', async (t) => {
  const result = await tickctl(t, [
    'preview',
    '0 0 32 * MONDAY',
    '--tz',
    'Foo/Bar',
    '--from',
    '2025-13-01T00:00:00Z',
    '--count',
    'many',
  ]);
  t.equal(result.code, 2);
  t.equal(result.stdout, '');
  t.match(result.stderr, /invalid input \(SCHEDULE_INVALID_CRON\)/);
  t.match(result.stderr, /schedule\.day_of_month \(token 2, char 4\): 32 is out of range/);
  t.match(result.stderr, /schedule\.day_of_week \(token 4, char 9\): full day names/);
  t.match(result.stderr, /timezone: unknown time zone 'Foo\/Bar'/);
  t.match(result.stderr, /--from \(char 5\): month 13 is out of range/);
  t.match(result.stderr, /--count: 'many' is not a whole number/);
  t.match(result.stderr, /\n\s+0 0 32 \* MONDAY\n\s+\^\^\n/, 'a caret under the bad day');
});

t.test('invalid input with --json: a JSON error on stderr', async (t) => {
  const result = await tickctl(t, [
    'preview',
    'every 5w',
    '--from',
    '2025-01-01T00:00:00Z',
    '--json',
  ]);
  t.equal(result.code, 2);
  t.equal(result.stdout, '');
  t.same(JSON.parse(result.stderr), {
    error: {
      code: 'SCHEDULE_INVALID_INTERVAL',
      violations: [
        {
          field: 'schedule.every',
          reason: "unknown unit 'w': use ms, s, m, h or d",
          position: { tokenIndex: 1, charIndex: 7, charCount: 1 },
        },
      ],
    },
  });
});

t.test('usage errors exit 2', async (t) => {
  const missing = await tickctl(t, ['preview']);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /missing required argument 'schedule'/);
  const unknown = await tickctl(t, ['preview', '@daily', '--bogus']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown option '--bogus'/);
  const help = await tickctl(t, ['preview', '--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /--tz <zone>/);
});
