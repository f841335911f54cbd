/**
 * Scratch copies of the project for `npm run test:mutants`: the files git knows of (tracked, and
 * untracked ones not ignored, as they are in the working tree) copied into a temporary directory,
 * node_modules linked, and at most one mutant applied. Nothing here touches the project itself.
 */
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { transformSync } from 'esbuild';
import { TickraftError } from '../../src/base/errors.js';
import type { Mutant } from './catalog.js';

export type MutantToolErrorCode =
  | 'MUTANTS_USAGE'
  | 'MUTANTS_CATALOG_INVALID'
  | 'MUTANT_DOES_NOT_APPLY'
  | 'MUTANTS_BASELINE_FAILED'
  | 'MUTANTS_SCRATCH';

/** A failure of the tool itself (not a mutant surviving): the run stops with exit code 2. */
export class MutantToolError extends TickraftError {
  override readonly name = 'MutantToolError';
  declare readonly code: MutantToolErrorCode;

  constructor(
    code: MutantToolErrorCode,
    message: string,
    options: { cause?: unknown; details?: Readonly<Record<string, unknown>> } = {},
  ) {
    super(code, message, options);
  }
}

/** A temporary directory holding the copy (`project`) and the checks' output (`logs`). */
export interface Scratch {
  readonly dir: string;
  readonly project: string;
  readonly logs: string;
}

/** The project's files, relative to `root`: tracked, and untracked ones that are not ignored. */
export function projectFiles(root: string): string[] {
  let out: string;
  try {
    out = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (cause) {
    throw new MutantToolError('MUTANTS_SCRATCH', `git ls-files failed in ${root}`, { cause });
  }
  // node_modules may be a symlink git does not ignore (a worktree sharing the main checkout's).
  const files = out
    .split('\0')
    .filter((f) => f !== '' && f !== 'node_modules' && !f.startsWith('node_modules/'));
  return [...new Set(files)];
}

/** Copies `files` of `root` into a new temporary directory and links node_modules. */
export function makeScratch(root: string, files: readonly string[], label: string): Scratch {
  const dir = mkdtempSync(join(tmpdir(), `tickraft-mutant-${label}-`));
  const project = join(dir, 'project');
  const logs = join(dir, 'logs');
  try {
    mkdirSync(project);
    mkdirSync(logs);
    for (const f of files) {
      const from = join(root, f);
      // Deleted in the working tree but still tracked: the copy is as the tree is.
      const st = lstatSync(from, { throwIfNoEntry: false });
      if (!st) continue;
      const to = join(project, f);
      mkdirSync(dirname(to), { recursive: true });
      if (st.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
      else if (st.isFile()) copyFileSync(from, to);
    }
    const modules = join(root, 'node_modules');
    if (!existsSync(modules))
      throw new MutantToolError('MUTANTS_SCRATCH', `${modules} is missing: run npm ci first`);
    symlinkSync(realpathSync(modules), join(project, 'node_modules'), 'dir');
  } catch (cause) {
    rmSync(dir, { recursive: true, force: true });
    if (cause instanceof MutantToolError) throw cause;
    throw new MutantToolError('MUTANTS_SCRATCH', `could not make a scratch copy in ${dir}`, {
      cause,
    });
  }
  return { dir, project, logs };
}

export function removeScratch(s: Scratch): void {
  rmSync(s.dir, { recursive: true, force: true });
}

function occurrences(text: string, find: string): number {
  let n = 0;
  for (let at = text.indexOf(find); at !== -1; at = text.indexOf(find, at + 1)) n++;
  return n;
}

/**
 * The text of `m.file` under `root` with the mutant applied. Throws MUTANT_DOES_NOT_APPLY unless
 * `find` occurs exactly once and the result still parses: a mutant must be a bug, not a syntax
 * error that any check would trip over.
 */
export function mutatedText(root: string, m: Mutant): string {
  const path = join(root, m.file);
  if (!existsSync(path))
    throw new MutantToolError('MUTANT_DOES_NOT_APPLY', `${m.id}: ${m.file} does not exist`);
  const text = readFileSync(path, 'utf8');
  const n = occurrences(text, m.find);
  if (n !== 1) {
    throw new MutantToolError(
      'MUTANT_DOES_NOT_APPLY',
      `${m.id}: its find text occurs ${n} times in ${m.file} (must be exactly once); the code ` +
        `moved on: update scripts/mutants/catalog.ts`,
      { details: { id: m.id, file: m.file, occurrences: n } },
    );
  }
  const out = text.replace(m.find, () => m.replace);
  try {
    transformSync(out, { loader: 'ts', sourcefile: m.file, logLevel: 'silent' });
  } catch (cause) {
    throw new MutantToolError(
      'MUTANT_DOES_NOT_APPLY',
      `${m.id}: ${m.file} no longer parses with the mutant applied`,
      { cause },
    );
  }
  return out;
}

/** Applies `m` to the copy. */
export function applyMutant(s: Scratch, m: Mutant): void {
  writeFileSync(join(s.project, m.file), mutatedText(s.project, m));
}
