/**
 * `npm run build` (also run by `npm ci` through `prepare`, and by tap before the tests): bundles
 * the two programs into plain JavaScript with esbuild, so that bin/tickctl and bin/tickraft start
 * without compiling TypeScript.
 *
 *   dist/cli/tickctl.js      src/cli/main.ts and every package it imports: one module to load
 *                            instead of a few hundred (grpc-js alone is ~80). What a command
 *                            imports on demand (`await import(…)`, e.g. preview's time-zone
 *                            library) goes into a chunk next to it, loaded only by that command.
 *   dist/server/tickraft.js  src/server/main.ts; packages stay in node_modules (classic-level is
 *                            a native addon, pino starts worker threads from its own files).
 *   dist/build.json          when the build started and which files went into each bundle:
 *                            bin/launch.js runs a bundle only while none of them is newer.
 *
 * Each bundle sits at the depth of its entry under src/, so the sources' `new URL('../../proto/…',
 * import.meta.url)` still names the repository's proto/ directory. No type checking here: that is
 * `npm run typecheck`. Source maps are written next to each bundle (NODE_OPTIONS=
 * --enable-source-maps maps stack traces back to src/; off by default, as it slows the start).
 */
import { build, type Metafile, type Plugin } from 'esbuild';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseApiProto } from '../src/api/client-proto.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DIST = join(ROOT, 'dist');
/** npm rewrites this at every install: it stands for every bundled file under node_modules. */
const INSTALL_STAMP = 'node_modules/.package-lock.json';

/** What a bundle carries beyond its imports: esbuild `define`s, and the files they come from. */
interface Embedded {
  readonly define: Record<string, string>;
  readonly inputs: readonly string[];
}

/** The API's .proto already parsed, so that tickctl skips the parser (src/api/client-proto.ts). */
function embeddedApiProto(): Embedded {
  const json = JSON.stringify(parseApiProto().toJSON());
  return {
    define: { TICKRAFT_API_PROTO_JSON: JSON.stringify(json) },
    inputs: ['proto/tickraft.proto'],
  };
}

interface Target {
  readonly name: 'tickctl' | 'tickraft';
  readonly entry: string;
  readonly out: string;
  readonly bundlePackages: boolean;
  /** Dynamic imports become chunks beside the bundle instead of being inlined. */
  readonly splitting: boolean;
  readonly embed?: () => Embedded;
}

const TARGETS: readonly Target[] = [
  {
    name: 'tickctl',
    entry: 'src/cli/main.ts',
    out: 'cli/tickctl.js',
    bundlePackages: true,
    splitting: true,
    embed: embeddedApiProto,
  },
  {
    name: 'tickraft',
    entry: 'src/server/main.ts',
    out: 'server/tickraft.js',
    bundlePackages: false,
    splitting: false,
  },
];

/** What dist/build.json holds (bin/launch.js reads it). */
export interface BuildManifest {
  /** mtime of dist/.build-start, written before any source was read (same clock as the inputs). */
  readonly startedAtMs: number;
  readonly bundles: Record<string, { readonly file: string; readonly inputs: readonly string[] }>;
}

/**
 * CommonJS packages inside an ES module bundle: `require` comes from createRequire, and
 * `__dirname`/`__filename` (grpc-js finds its own .proto files with them) are rewritten to the
 * module's real place, relative to the bundle, so they stay right wherever the checkout lives.
 */
const BANNER = [
  "import { createRequire as __tickraftCreateRequire } from 'node:module';",
  "import { fileURLToPath as __tickraftFileURLToPath } from 'node:url';",
  'const require = __tickraftCreateRequire(import.meta.url);',
  'const __tickraftPath = (rel) => __tickraftFileURLToPath(new URL(rel, import.meta.url));',
].join('\n');

function packagePaths(outFile: string): Plugin {
  return {
    name: 'package-paths',
    setup(b) {
      b.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, (args) => {
        const text = readFileSync(args.path, 'utf8');
        if (!/__dirname|__filename/.test(text)) return undefined;
        const fromBundle = (p: string): string =>
          JSON.stringify(relative(dirname(outFile), p).split(sep).join('/'));
        return {
          contents: text
            .replace(/\b__dirname\b/g, `__tickraftPath(${fromBundle(dirname(args.path))})`)
            .replace(/\b__filename\b/g, `__tickraftPath(${fromBundle(args.path)})`),
          loader: 'js',
        };
      });
    },
  };
}

function inputsOf(meta: Metafile): string[] {
  const own = Object.keys(meta.inputs).filter((p) => !p.split('/').includes('node_modules'));
  const usesPackages = Object.keys(meta.inputs).length > own.length;
  const stamp = usesPackages && existsSync(join(ROOT, INSTALL_STAMP)) ? [INSTALL_STAMP] : [];
  return [...own, 'scripts/build.ts', ...stamp].sort();
}

/** Writes `text` to `path` by renaming a temporary file: a reader never sees half a file. */
function writeAtomically(path: string, text: string | Uint8Array): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

async function bundle(target: Target): Promise<{ file: string; inputs: string[] }> {
  const outFile = join(DIST, target.out);
  const outDir = dirname(outFile);
  const embedded = target.embed?.() ?? { define: {}, inputs: [] };
  const result = await build({
    absWorkingDir: ROOT,
    // Named so that the entry's output is `out` whatever the source file is called.
    entryPoints: { [basename(target.out, '.js')]: target.entry },
    outdir: outDir,
    splitting: target.splitting,
    chunkNames: 'chunk-[hash]',
    define: embedded.define,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    metafile: true,
    write: false,
    logLevel: 'warning',
    ...(target.bundlePackages
      ? { banner: { js: BANNER }, plugins: [packagePaths(outFile)] }
      : { packages: 'external' as const }),
  });
  for (const f of result.outputFiles) writeAtomically(f.path, f.contents);
  // Chunks of earlier builds have other hashes; nothing loads them any more.
  const written = new Set(result.outputFiles.map((f) => f.path));
  for (const name of readdirSync(outDir)) {
    if (name.startsWith('chunk-') && !written.has(join(outDir, name))) rmSync(join(outDir, name));
  }
  return { file: target.out, inputs: [...inputsOf(result.metafile), ...embedded.inputs].sort() };
}

export async function buildAll(): Promise<BuildManifest> {
  mkdirSync(DIST, { recursive: true });
  const stamp = join(DIST, '.build-start');
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  const startedAtMs = statSync(stamp).mtimeMs;
  const bundles: Record<string, { file: string; inputs: string[] }> = {};
  for (const t of TARGETS) bundles[t.name] = await bundle(t);
  const manifest: BuildManifest = { startedAtMs, bundles };
  // Written last: until then bin/launch.js keeps judging by the previous manifest.
  writeAtomically(join(DIST, 'build.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

const started = performance.now();
const manifest = await buildAll();
const files = Object.values(manifest.bundles).map((b) => `dist/${b.file}`);
console.log(`built ${files.join(', ')} in ${Math.round(performance.now() - started)} ms`);
