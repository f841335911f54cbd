// Usage errors exit 2, as tickctl --help documents, for every command there is. The commands are
// enumerated from the commander program itself, so a command added later is walked too: each
// gets an unknown flag, its required arguments left out, one argument too many and each required
// option left out, and must exit 2 with a message naming what is wrong. Runs tickctl in-process
// (runTickctl with captured output); a usage error is found before any call, and
// TICKCTL_ENDPOINT points at a loopback port nothing listens on in case one were not.
// Then the real bin/tickctl and bin/tickraft processes: a usage error's exit code and --version.
import { readFileSync } from 'node:fs';
import type { Command, Option } from 'commander';
import t from 'tap';
import { specFrom } from '../../../src/cli/commands/jobs.js';
import { buildProgram } from '../../../src/cli/main.js';
import {
  runBin,
  runTickctl as runTickctlProcess,
  runTickctlInProcess,
  TICKRAFT,
} from '../../helpers/tickctl.js';

process.env['TICKCTL_ENDPOINT'] = '127.0.0.1:1';

const VERSION = (
  JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

const tickctl = (argv: readonly string[]) =>
  runTickctlInProcess(argv, { nowMs: () => 1_751_331_600_000, monotonicMs: () => 0 });

interface Walked {
  readonly path: readonly string[];
  readonly cmd: Command;
}

function walk(cmd: Command, path: readonly string[] = []): Walked[] {
  return cmd.commands.flatMap((sub) => {
    const p = [...path, sub.name()];
    return [{ path: p, cmd: sub }, ...walk(sub, p)];
  });
}

/** Required options with a value commander accepts: the first choice, or a number. */
function requiredOptions(cmd: Command, except?: Option): string[] {
  return cmd.options
    .filter((o) => o.mandatory && o !== except)
    .flatMap((o) => [o.long ?? o.flags, o.argChoices?.[0] ?? '1']);
}

const program = buildProgram({
  io: {
    writeOut: () => undefined,
    writeErr: () => undefined,
    clock: { nowMs: () => 0, monotonicMs: () => 0 },
  },
  exitCode: 0,
});
const commands = walk(program);

t.test('the walk finds every noun and verb', (t) => {
  const names = commands.map((c) => c.path.join(' '));
  for (const name of [
    'preview',
    'jobs create',
    'jobs list',
    'runs list',
    'dlq replay',
    'worker',
    'sink',
    'cluster status',
    'leader transfer',
    'tenants update',
  ])
    t.ok(names.includes(name), `${name} is walked`);
  t.ok(commands.length >= 30, `${commands.length} commands`);
  t.end();
});

t.test('an unknown flag: exit 2, naming the flag', async (t) => {
  for (const { path, cmd } of commands) {
    const args = cmd.registeredArguments.filter((a) => a.required).map(() => 'x');
    const r = await tickctl([...path, ...args, ...requiredOptions(cmd), '--no-such-flag']);
    t.equal(r.code, 2, `${path.join(' ')} --no-such-flag: exit 2 (${r.err.split('\n')[0]})`);
    t.match(r.err, /unknown option '--no-such-flag'/, `${path.join(' ')}: names the flag`);
    t.equal(r.out, '', `${path.join(' ')}: nothing on stdout`);
  }
});

t.test('required arguments left out, or one too many: exit 2, saying which', async (t) => {
  for (const { path, cmd } of commands) {
    if (cmd.commands.length > 0) continue;
    const declared = cmd.registeredArguments;
    const required = declared.filter((a) => a.required);
    if (required.length > 0) {
      const r = await tickctl([...path, ...requiredOptions(cmd)]);
      t.equal(r.code, 2, `${path.join(' ')} without arguments: exit 2`);
      t.match(
        r.err,
        `missing required argument '${required[0]!.name()}'`,
        `${path.join(' ')}: names the argument`,
      );
    }
    if (declared.some((a) => a.variadic)) continue;
    const r = await tickctl([
      ...path,
      ...declared.map(() => 'x'),
      'extra',
      ...requiredOptions(cmd),
    ]);
    t.equal(r.code, 2, `${path.join(' ')} with an argument too many: exit 2`);
    t.match(r.err, /too many arguments/, `${path.join(' ')}: says there are too many arguments`);
  }
});

t.test('each required option left out: exit 2, naming it', async (t) => {
  let seen = 0;
  for (const { path, cmd } of commands) {
    const args = cmd.registeredArguments.filter((a) => a.required).map(() => 'x');
    for (const o of cmd.options.filter((x) => x.mandatory)) {
      seen++;
      const r = await tickctl([...path, ...args, ...requiredOptions(cmd, o)]);
      t.equal(r.code, 2, `${path.join(' ')} without ${o.long}: exit 2`);
      t.match(r.err, `required option '${o.flags}' not specified`, `names ${o.long}`);
    }
  }
  t.ok(seen >= 6, `${seen} required options checked`);
});

t.test('--tenant left out where a job, run or tenant is named: exit 2, naming it', async (t) => {
  let seen = 0;
  for (const { path, cmd } of commands) {
    if (!cmd.options.some((o) => o.long === '--tenant')) continue;
    // A token's --tenant names whom the token acts for (none: an admin token), not a job's.
    if (path[0] === 'tokens') continue;
    seen++;
    const args = cmd.registeredArguments.filter((a) => a.required).map(() => 'x');
    // An update with nothing to change is refused first, for that reason.
    const more = path.join(' ') === 'jobs update' ? ['--name', 'n'] : [];
    const r = await tickctl([...path, ...args, ...requiredOptions(cmd), ...more]);
    t.equal(r.code, 2, `${path.join(' ')} without --tenant: exit 2`);
    t.match(
      r.err,
      "required option '--tenant <id>' not specified (job ids are unique per tenant)",
      `${path.join(' ')}: names --tenant and why`,
    );
    t.equal(r.out, '', `${path.join(' ')}: nothing on stdout`);
  }
  const want = [
    'jobs create',
    'jobs get',
    'jobs list',
    'jobs update',
    'jobs pause',
    'jobs resume',
    'jobs delete',
    'jobs trigger',
    'jobs backfill',
    'jobs graph',
    'runs list',
    'runs get',
    'runs watch',
    'runs complete',
    'runs heartbeat',
    'runs logs',
    'dlq list',
    'dlq purge',
    'dlq replay',
  ];
  const withTenant = commands
    .filter(({ path }) => path[0] !== 'tokens')
    .filter(({ cmd }) => cmd.options.some((o) => o.long === '--tenant'))
    .map(({ path }) => path.join(' '));
  t.same(withTenant.sort(), want.sort(), 'every command that names a job or run takes --tenant');
  t.equal(seen, want.length);
});

t.test('enum flags take only the documented values', async (t) => {
  const create = [
    'jobs',
    'create',
    'j1',
    '--tenant',
    'acme',
    '--schedule',
    'every 1m',
    '--url',
    'http://127.0.0.1:9/h',
  ];
  for (const [flag, value, allowed] of [
    ['--delivery', 'at-most-once', 'at_least_once, at_most_once'],
    ['--misfire', 'sometimes', 'fire_once, fire_all, skip'],
    ['--overlap', 'never', 'allow, skip, buffer_one, buffer_all'],
  ] as const) {
    for (const verb of [create, ['jobs', 'update', 'j1']]) {
      const r = await tickctl([...verb, flag, value]);
      t.equal(r.code, 2, `${verb[1]} ${flag} ${value}: exit 2`);
      t.match(r.err, `option '${flag} `, `${flag}: named`);
      t.match(
        r.err,
        `'${value}' is invalid. Allowed values are ${allowed}.`,
        `${flag}: allowed values`,
      );
    }
    const help = await tickctl(['jobs', 'create', '--help']);
    t.match(
      help.out.replace(/\s+/g, ' '),
      allowed
        .split(', ')
        .map((a) => `"${a}"`)
        .join(', '),
      `--help lists ${flag}'s values`,
    );
  }
  const status = await tickctl(['runs', 'list', 'j1', '--status', 'BOGUS']);
  t.equal(status.code, 2, 'runs list --status BOGUS: exit 2');
  t.match(
    status.err,
    "option '--status <status>' argument 'BOGUS' is invalid. Allowed values are SCHEDULED, RUNNING, FAILED, SUCCEEDED, DEAD, CANCELLED, SKIPPED, MISSED, UNKNOWN.",
  );
});

t.test(
  '--max-concurrency: a whole number from 1 to 1000, with a policy that takes it',
  async (t) => {
    const create = [
      'jobs',
      'create',
      'j1',
      '--tenant',
      'acme',
      '--schedule',
      'every 1m',
      '--url',
      'http://127.0.0.1:9/h',
      '--overlap',
      'skip',
    ];
    for (const value of ['0', '1001', '-1', '2.5', 'two', '']) {
      for (const verb of [create, ['jobs', 'update', 'j1', '--tenant', 'acme']]) {
        const r = await tickctl([...verb, '--max-concurrency', value]);
        t.equal(r.code, 2, `${verb[1]} --max-concurrency '${value}': exit 2`);
        t.match(
          r.err,
          `option '--max-concurrency <n>' argument '${value}' is invalid. must be a whole number from 1 to 1000.`,
          `${verb[1]} '${value}': names the flag and the range`,
        );
        t.equal(r.out, '', 'nothing on stdout');
      }
    }
    const withAllow = await tickctl([...create.slice(0, -2), '--max-concurrency', '2']);
    t.equal(withAllow.code, 2, 'a limit with the default policy (allow): exit 2 before any call');
    t.match(
      withAllow.err,
      '--max-concurrency: overlap policy allow places no limit on runs in flight; give --overlap skip, buffer_one or buffer_all with it',
    );
    const explicitAllow = await tickctl([
      ...create.slice(0, -1),
      'allow',
      '--max-concurrency',
      '2',
    ]);
    t.equal(explicitAllow.code, 2, 'with --overlap allow: exit 2');
    t.match(explicitAllow.err, /--max-concurrency: overlap policy allow places no limit/);
    for (const verb of ['create', 'update']) {
      const help = (await tickctl(['jobs', verb, '--help'])).out.replace(/\s+/g, ' ');
      t.match(help, /--max-concurrency <n> most runs of the job in flight at once, 1-1000/, verb);
      t.match(help, /SKIPPED \(run_in_flight\)/, `${verb} --help names the reason recorded`);
    }
    t.match(
      (await tickctl(['jobs', 'create', '--help'])).out.replace(/\s+/g, ' '),
      '(default 1 with skip and buffer_*)',
      'create --help names the default',
    );
  },
);

t.test('specFrom: --max-concurrency laid over a job read back, as jobs update does', (t) => {
  const job = {
    tenant: 'acme',
    overlap: { policy: 'OVERLAP_POLICY_BUFFER_ALL', bufferCap: 5, maxConcurrency: 3 },
  };
  t.same(
    specFrom({ maxConcurrency: 4 }, job)['overlap'],
    { policy: 'OVERLAP_POLICY_BUFFER_ALL', bufferCap: 5, maxConcurrency: 4 },
    'the limit replaced, the rest kept',
  );
  t.same(
    specFrom({ overlap: 'skip' }, job)['overlap'],
    { policy: 'OVERLAP_POLICY_SKIP', bufferCap: 5, maxConcurrency: 3 },
    'another limited policy keeps the limit',
  );
  t.same(
    specFrom({ overlap: 'allow' }, job)['overlap'],
    { policy: 'OVERLAP_POLICY_ALLOW', bufferCap: 5 },
    'allow drops the limit of the policy it replaces',
  );
  t.throws(
    () => specFrom({ overlap: 'allow', maxConcurrency: 2 }, job),
    /--max-concurrency: overlap policy allow places no limit/,
  );
  t.throws(
    () => specFrom({ maxConcurrency: 2 }, { overlap: { policy: 'OVERLAP_POLICY_ALLOW' } }),
    /--max-concurrency: overlap policy allow places no limit/,
    "the job's own policy is allow",
  );
  t.same(
    specFrom({ overlap: 'buffer_one', maxConcurrency: 2 })['overlap'],
    { policy: 'OVERLAP_POLICY_BUFFER_ONE', maxConcurrency: 2 },
    'create: sent as the API spells it',
  );
  t.end();
});

t.test(
  'jobs update with nothing to change is refused; its help names no create defaults',
  async (t) => {
    const r = await tickctl(['jobs', 'update', 'j1']);
    t.equal(r.code, 2, 'exit 2');
    t.match(r.err, /nothing to change: give at least one of --name, --schedule/);
    const help = (await tickctl(['jobs', 'update', '--help'])).out;
    t.notMatch(
      help,
      /default (UTC|at_least_once|fire_once|allow|5|30000|2|\{\})/,
      'no create default in update --help',
    );
    t.match(help, /--tenant <id>/, 'update names the job by --tenant');
    const only = await tickctl(['jobs', 'update', 'j1', '--tenant', 'acme']);
    t.equal(only.code, 2, 'update with only --tenant: exit 2');
    t.match(only.err, /nothing to change/, 'nothing to change');
    const createHelp = (await tickctl(['jobs', 'create', '--help'])).out;
    t.match(createHelp, /\(default at_least_once\)/, 'create --help still names its defaults');
    t.match(createHelp, /--anchor <instant>/, 'create takes --anchor');
  },
);

t.test('tickctl --version prints the package version', async (t) => {
  const r = await tickctl(['--version']);
  t.same(r, { code: 0, out: `${VERSION}\n`, err: '' });
});

/** bin/tickraft as a process, with its exit code and output. */
const tickraft = (args: readonly string[]) => runBin(TICKRAFT, args, { t });

t.test('connection options before the command: misuse is a usage error naming it', async (t) => {
  const cases: [readonly string[], RegExp][] = [
    [
      ['--endpoint', '127.0.0.1:2', 'jobs', 'get', 'j', '--endpoint', '127.0.0.1:3'],
      /--endpoint given both before and after 'get'/,
    ],
    [['--json', 'runs', 'list', 'j', '--json'], /--json given both before and after 'list'/],
    [
      ['--endpoint', '127.0.0.1:2', 'preview', '* * * * *'],
      /--endpoint does not apply to 'preview'/,
    ],
    [['--timeout-ms', '5', 'sink'], /--timeout-ms does not apply to 'sink'/],
    [
      ['--endpoint', '127.0.0.1:2', 'jobs', 'get', 'j', '--endpoints', '127.0.0.1:3'],
      /give --endpoint or --endpoints, not both/,
    ],
    [
      ['--endpoint', '127.0.0.1:2', '--endpoints', '127.0.0.1:3', 'jobs', 'get', 'j'],
      /give --endpoint or --endpoints, not both/,
    ],
    [['--endpoint', 'nocolon', 'jobs', 'get', 'j'], /--endpoint: 'nocolon' is not host:port/],
    [['--timeout-ms', 'soon', 'jobs', 'get', 'j'], /--timeout-ms must be a positive whole number/],
    [['--endpont', '127.0.0.1:2', 'jobs', 'get', 'j'], /unknown option '--endpont'/],
  ];
  for (const [argv, message] of cases) {
    const r = await tickctl(argv);
    t.equal(r.code, 2, `tickctl ${argv.join(' ')}: exit 2`);
    t.match(r.err, message, 'naming what is wrong');
    t.equal(r.out, '', 'and printing nothing else');
  }
  // TICKCTL_ENDPOINT is set (top of this file): both variables set cannot be chosen between.
  process.env['TICKCTL_ENDPOINTS'] = '127.0.0.1:4,127.0.0.1:5';
  t.teardown(() => delete process.env['TICKCTL_ENDPOINTS']);
  const r = await tickctl(['jobs', 'get', 'j']);
  t.equal(r.code, 2, 'TICKCTL_ENDPOINT and TICKCTL_ENDPOINTS both set: exit 2');
  t.match(r.err, /TICKCTL_ENDPOINT and TICKCTL_ENDPOINTS are both set/, 'naming both');
});

t.test('the real processes: usage errors exit 2, --version exits 0', async (t) => {
  const env = { ...process.env, TICKCTL_ENDPOINT: '127.0.0.1:1' };
  for (const args of [
    ['jobs', 'list'],
    ['jobs', 'get'],
    ['jobs', 'get', 'a', 'b'],
    ['jobs', 'create', 'j', '--bogus-flag'],
  ]) {
    const r = await runTickctlProcess(args, { env, t });
    t.equal(r.code, 2, `tickctl ${args.join(' ')}: exit 2 (${r.stderr.split('\n')[0]})`);
  }
  t.same(
    await runTickctlProcess(['--version'], { env, t }),
    { code: 0, stdout: `${VERSION}\n`, stderr: '' },
    'tickctl --version',
  );
  t.same(
    await tickraft(['--version']),
    { code: 0, stdout: `${VERSION}\n`, stderr: '' },
    'tickraft --version',
  );
});
