// bin/tickctl and bin/tickraft run the JavaScript bundles in dist/ only while those are newer than
// every file they were built from; otherwise they say why on stderr and run the TypeScript
// sources, so an edit is never hidden behind an old build. Checked on a copy of the repository
// (its own src/, bin/, dist/; node_modules linked), with real processes.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'tickraft-launch-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
for (const dir of ['bin', 'src', 'proto', 'scripts'])
  cpSync(join(REPO, dir), join(root, dir), { recursive: true });
for (const f of ['package.json', 'tsconfig.json']) cpSync(join(REPO, f), join(root, f));
symlinkSync(join(REPO, 'node_modules'), join(root, 'node_modules'));

function run(bin: string, args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [join(root, 'bin', bin), ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

function build(): void {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'scripts/build.ts')], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (r.status !== 0) throw new Error(`build failed: ${r.stderr}`);
}

t.test('without dist/, the sources run, and stderr says why', (t) => {
  const r = run('tickctl', ['--help']);
  t.equal(r.code, 0);
  t.match(r.out, /Usage: tickctl/);
  t.match(r.err, /tickctl: no build in dist\/: running the TypeScript sources through tsx/);
  t.end();
});

t.test('a fresh build runs without a word; an edit after it runs, with the reason', (t) => {
  build();
  const fresh = run('tickctl', ['--help']);
  t.equal(fresh.code, 0);
  t.equal(fresh.err, '', 'no note: the bundle ran');
  t.match(fresh.out, /Usage: tickctl/);
  t.equal(run('tickraft', ['serve', '--help']).err, '');

  const main = join(root, 'src/cli/main.ts');
  const text = readFileSync(main, 'utf8');
  const edited = text.replace(
    'tickctl: inspect schedules and operate a tickraft cluster',
    'tickctl: edited after the build',
  );
  t.not(edited, text, 'the description to edit is there');
  writeFileSync(main, edited);
  const stale = run('tickctl', ['--help']);
  t.equal(stale.code, 0);
  t.match(stale.out, /edited after the build/, 'the edited source ran, not the old bundle');
  t.match(stale.err, /src\/cli\/main\.ts changed after the last build/);
  t.equal(run('tickraft', ['serve', '--help']).err, '', "tickraft's bundle has other inputs");

  build();
  const rebuilt = run('tickctl', ['--help']);
  t.equal(rebuilt.err, '');
  t.match(rebuilt.out, /edited after the build/, 'the new bundle has the edit');
  t.end();
});
