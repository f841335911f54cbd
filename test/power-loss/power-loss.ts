/**
 * The file-system half of the power-loss test: builds the LD_PRELOAD shim (unsynced-shim.c),
 * and after the child that ran under it was killed, rewrites the store's directory to what a
 * power failure at that moment could have left on disk.
 *
 * The model (what survives a power failure), as on ext4 with its default data=ordered journal:
 * - File data: the bytes a file held when an fsync or fdatasync of it last succeeded survive;
 *   bytes written after that are lost, or (tearing) a random prefix of them survives, as when
 *   the page cache had written back part of the tail. Data is never reordered: what survives is
 *   always a prefix of what was written.
 * - Names (create, rename, unlink) and truncations at open: they happen in order, and an fsync or
 *   fdatasync of any file, or of the directory, makes every one made before it durable (the
 *   journal commit an fsync forces carries all earlier metadata). Names made after the last such
 *   call are lost together, in order: a renamed file that nothing synced since keeps its old
 *   name, a deleted one is back, a created one does not exist, and a file truncated at open
 *   holds what it held before (its synced part, or a torn prefix of the rest).
 * - A file whose name survived but whose data was never synced is there with no bytes (or a torn
 *   prefix of them), as ext4 leaves a file written without fsync.
 * Not modelled: a stricter file system on which only an fsync of the directory makes a name
 * durable (LevelDB 1.20 syncs the directory only for a new MANIFEST, so a new log file or the
 * rename of CURRENT rely on the ordering above); garbage or zeroes in a torn tail (LevelDB's log
 * checksums would catch them, but that is LevelDB's property, not the store's); sectors lost
 * from the middle of synced data; and a disk that lies about its cache.
 */
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import {
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SeededRand } from '../../src/base/rand.js';

const SHIM_SOURCE = fileURLToPath(new URL('./unsynced-shim.c', import.meta.url));
const WRITER_SOURCE = fileURLToPath(new URL('./writer.ts', import.meta.url));

/** The journal or the directory shows something the model cannot represent. */
export class PowerLossModelError extends Error {
  override readonly name = 'PowerLossModelError';
}

/** The shim could not be compiled (no C compiler, or the compiler failed). */
export class ShimBuildError extends Error {
  override readonly name = 'ShimBuildError';
}

/** Compiles the shim into `outDir`; returns the library's path. */
export function buildShim(outDir: string): string {
  const out = join(outDir, 'unsynced-shim.so');
  const args = ['-shared', '-fPIC', '-O2', '-Wall', '-Wextra', '-Werror', '-o', out, SHIM_SOURCE];
  const r = spawnSync('cc', [...args, '-ldl', '-lpthread'], { encoding: 'utf8' });
  if (r.error !== undefined) {
    throw new ShimBuildError(
      `the power-loss test compiles ${SHIM_SOURCE} with cc, which could not run ` +
        `(${r.error.message}); install a C compiler (Debian: apt-get install gcc)`,
      { cause: r.error },
    );
  }
  if (r.status !== 0) {
    throw new ShimBuildError(`cc failed (status ${r.status}) on ${SHIM_SOURCE}:\n${r.stderr}`);
  }
  return out;
}

/**
 * Bundles writer.ts and the store code it imports into `outDir` with esbuild (as the build does
 * for bin/tickraft), so that each child starts in about 0.1 s instead of the second tsx takes to
 * compile the sources. classic-level, a native addon, is imported from node_modules by its path.
 * Returns the bundle's path.
 */
export async function bundleWriter(outDir: string): Promise<string> {
  const outfile = join(outDir, 'writer.mjs');
  const classicLevel = createRequire(import.meta.url).resolve('classic-level');
  await build({
    entryPoints: [WRITER_SOURCE],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'error',
    plugins: [
      {
        name: 'native-addon',
        setup(b) {
          b.onResolve({ filter: /^classic-level$/ }, () => ({
            path: classicLevel,
            external: true,
          }));
        },
      },
    ],
  });
  return outfile;
}

/** Where one run keeps its store and the shim's journal. */
export interface ShimDirs {
  /** The store's directory, watched by the shim. */
  readonly db: string;
  /** The journal and the inode links (same file system as db). */
  readonly state: string;
}

/** Makes the directories of one run under `root` (a new path without symlinks in it). */
export function makeShimDirs(root: string): ShimDirs {
  const dirs = { db: join(root, 'db'), state: join(root, 'shim') };
  mkdirSync(dirs.db, { recursive: true });
  mkdirSync(join(dirs.state, 'inodes'), { recursive: true });
  return dirs;
}

/** The environment that loads the shim into a child and points it at `dirs`. */
export function shimEnv(library: string, dirs: ShimDirs): Record<string, string> {
  return { LD_PRELOAD: library, UNSYNCED_SHIM_DIR: dirs.db, UNSYNCED_SHIM_STATE: dirs.state };
}

type Line =
  | { readonly kind: 'C' | 'U'; readonly ino: string; readonly name: string }
  | { readonly kind: 'T'; readonly ino: string; readonly name: string; readonly saved: string }
  | { readonly kind: 'R'; readonly ino: string; readonly from: string; readonly to: string }
  | { readonly kind: 'S'; readonly ino: string; readonly size: number; readonly covers: number }
  | { readonly kind: 'D'; readonly covers: number }
  | { readonly kind: 'X'; readonly what: string };

function parseJournal(text: string): Line[] {
  const rows = text.split('\n');
  if (!(rows[0] ?? '').startsWith('# unsynced-shim'))
    throw new PowerLossModelError('the journal has no header: the shim was not loaded');
  const out: Line[] = [];
  for (const row of rows) {
    if (row === '' || row.startsWith('#')) continue;
    const f = row.split(' ');
    const bad = (): never => {
      throw new PowerLossModelError(`unreadable journal line '${row}'`);
    };
    const num = (s: string | undefined): number => {
      const n = Number(s);
      return Number.isSafeInteger(n) && n >= 0 ? n : bad();
    };
    switch (f[0]) {
      case 'C':
      case 'U':
        if (f.length !== 3) bad();
        out.push({ kind: f[0], ino: f[1]!, name: f[2]! });
        break;
      case 'T':
        if (f.length !== 4) bad();
        out.push({ kind: 'T', ino: f[1]!, name: f[2]!, saved: f[3]! });
        break;
      case 'R':
        if (f.length !== 4) bad();
        out.push({ kind: 'R', ino: f[1]!, from: f[2]!, to: f[3]! });
        break;
      case 'S':
        if (f.length !== 4) bad();
        out.push({ kind: 'S', ino: f[1]!, size: num(f[2]), covers: num(f[3]) });
        break;
      case 'D':
        if (f.length !== 2) bad();
        out.push({ kind: 'D', covers: num(f[1]) });
        break;
      case 'X':
        out.push({ kind: 'X', what: row.slice(2) });
        break;
      default:
        bad();
    }
  }
  return out;
}

/** What the power loss did to one file that survived it. */
export interface FileOutcome {
  readonly name: string;
  /** Bytes synced (durable). */
  readonly synced: number;
  /** Bytes the file held when the child died. */
  readonly size: number;
  /** Bytes it holds now: synced plus a torn prefix of the rest. */
  readonly kept: number;
}

export interface PowerLossReport {
  readonly files: readonly FileOutcome[];
  /** Names in the directory when the child died that the power loss took away. */
  readonly lostNames: readonly string[];
  /** Names back or kept under their old name because what changed them was never synced. */
  readonly restoredNames: readonly string[];
  /** Unsynced bytes dropped from surviving files. */
  readonly droppedBytes: number;
  /** Successful fsync/fdatasync calls on the directory's files and on the directory. */
  readonly syncs: number;
  /** Where the directory as the child left it was moved to. */
  readonly killedCopy: string;
}

export interface PowerLossOptions {
  readonly rand: SeededRand;
  /** Probability that a file keeps a random prefix of its unsynced tail instead of none. */
  readonly tearProbability: number;
}

/**
 * Rewrites `dirs.db` as a power failure right now would leave it (see the model above). The
 * directory as the child left it is moved next to it (the report says where). Throws
 * PowerLossModelError when the journal shows what the model does not cover.
 */
export function powerLoss(dirs: ShimDirs, options: PowerLossOptions): PowerLossReport {
  const lines = parseJournal(readFileSync(join(dirs.state, 'journal'), 'utf8'));
  const unsupported = lines.flatMap((l) => (l.kind === 'X' ? [l.what] : []));
  if (unsupported.length > 0)
    throw new PowerLossModelError(
      `the shim saw what the model does not cover: ${unsupported.join('; ')}`,
    );

  // Data: each inode's contents (one per truncation at open) and each one's size at its last
  // successful sync. Names and truncations: every one before the last line a sync covers is
  // durable.
  const versions = new Map<string, Version[]>();
  const versionsOf = (ino: string): Version[] => {
    let vs = versions.get(ino);
    if (vs === undefined) versions.set(ino, (vs = [{ from: -1, file: ino, synced: 0 }]));
    return vs;
  };
  let covered = 0;
  let syncs = 0;
  for (const [i, l] of lines.entries()) {
    if (l.kind === 'S') {
      versionsOf(l.ino).at(-1)!.synced = l.size;
      covered = Math.max(covered, l.covers);
      syncs++;
    } else if (l.kind === 'D') {
      covered = Math.max(covered, l.covers);
      syncs++;
    } else if (l.kind === 'T') {
      const vs = versionsOf(l.ino);
      vs.at(-1)!.file = l.saved;
      vs.push({ from: i, file: l.ino, synced: 0 });
    }
  }
  const durable = replayNames(lines.slice(0, covered));
  const current = replayNames(lines);

  // The journal must account for every file the child left: one created by the op in flight
  // when it died may lack its line (the kill fell between the call and the journal write).
  const inodes = join(dirs.state, 'inodes');
  const onDisk = new Map<string, string>();
  for (const name of readdirSync(dirs.db).sort()) {
    const st = lstatSync(join(dirs.db, name));
    if (!st.isFile()) throw new PowerLossModelError(`${name} in the store is not a regular file`);
    onDisk.set(name, String(st.ino));
  }
  const unaccounted = [...onDisk].filter(([name, ino]) => current.get(name) !== ino);
  const missing = [...current].filter(([name]) => !onDisk.has(name));
  if (unaccounted.length + missing.length > 2)
    throw new PowerLossModelError(
      `the directory does not match the journal: on disk but not journaled ${JSON.stringify(unaccounted)}, ` +
        `journaled but not on disk ${JSON.stringify(missing.map(([n]) => n))}`,
    );

  const files: FileOutcome[] = [];
  const contents = new Map<string, Uint8Array>();
  let droppedBytes = 0;
  for (const [name, ino] of [...durable].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    // The content as of the last truncation that is durable.
    const vs = versionsOf(ino);
    let k = vs.length - 1;
    while (vs[k]!.from >= covered) k--;
    const version = vs[k]!;
    const bytes =
      version.file === '-' ? new Uint8Array() : readFileSync(join(inodes, version.file));
    const s = version.synced;
    if (bytes.length < s)
      throw new PowerLossModelError(
        `${name} holds ${bytes.length} bytes, fewer than the ${s} synced`,
      );
    const tail = bytes.length - s;
    const torn =
      tail > 0 && options.rand.chance(options.tearProbability) ? options.rand.int(tail + 1) : 0;
    const kept = s + torn;
    contents.set(name, bytes.subarray(0, kept));
    files.push({ name, synced: s, size: bytes.length, kept });
    droppedBytes += bytes.length - kept;
  }

  const killedCopy = `${dirs.db}.killed`;
  renameSync(dirs.db, killedCopy);
  mkdirSync(dirs.db);
  for (const [name, bytes] of contents) writeFileSync(join(dirs.db, name), bytes);
  return {
    files,
    lostNames: [...onDisk.keys()].filter((n) => !durable.has(n)),
    restoredNames: [...durable].filter(([n, ino]) => onDisk.get(n) !== ino).map(([n]) => n),
    droppedBytes,
    syncs,
    killedCopy,
  };
}

/** One content of an inode: from its creation or a truncation at open to the next truncation. */
interface Version {
  /** The journal line of the truncation that began it (-1: the file's creation). */
  readonly from: number;
  /**
   * Its bytes, in STATE/inodes: the inode's own link for the last version, the shim's copy
   * taken before the truncation that ended it for the others ('-': it was empty).
   */
  file: string;
  /** Its size at its last successful sync. */
  synced: number;
}

/** The directory's names (name → inode) after the journal's lines, applied in order. */
function replayNames(lines: readonly Line[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const l of lines) {
    switch (l.kind) {
      case 'C':
        names.set(l.name, l.ino);
        break;
      case 'R':
        if (names.get(l.from) !== l.ino)
          throw new PowerLossModelError(
            `the journal renames ${l.from}, which is not inode ${l.ino}`,
          );
        names.delete(l.from);
        names.set(l.to, l.ino);
        break;
      case 'U':
        if (names.get(l.name) !== l.ino)
          throw new PowerLossModelError(
            `the journal unlinks ${l.name}, which is not inode ${l.ino}`,
          );
        names.delete(l.name);
        break;
      default:
        break;
    }
  }
  return names;
}
