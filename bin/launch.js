// What bin/tickctl and bin/tickraft share: run the program's JavaScript bundle from dist/ (built by
// `npm run build`, which `npm ci` runs) while it is newer than every file it was built from;
// otherwise say so on stderr and run the TypeScript sources through tsx, which is correct but
// costs about a second of compiling at each start. A bundle older than the sources therefore never
// runs: a developer who edits src/ and runs a test or a command gets the code as it is now.
//
// Plain JavaScript (no build step may come before this file) and written for a fast start: a few
// synchronous stat calls, then one import.
import { readFileSync, statSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/**
 * The bundle to run for `name` ({ file }), or why not ({ reason }), judged by dist/build.json
 * (written by scripts/build.ts): every input of the bundle must exist and be older than the build.
 */
export function pickBundle(root, name) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(`${root}dist/build.json`, 'utf8'));
  } catch {
    return { reason: 'no build in dist/' };
  }
  const entry = manifest.bundles?.[name];
  if (typeof manifest.startedAtMs !== 'number' || !entry || !Array.isArray(entry.inputs)) {
    return { reason: `dist/build.json names no ${name} bundle` };
  }
  for (const input of entry.inputs) {
    let mtimeMs;
    try {
      mtimeMs = statSync(`${root}${input}`).mtimeMs;
    } catch {
      return { reason: `dist/ was built from ${input}, which is gone` };
    }
    // Equal times count as newer: the file may have changed within the clock's resolution.
    if (mtimeMs >= manifest.startedAtMs) return { reason: `${input} changed after the last build` };
  }
  return { file: `${root}dist/${entry.file}` };
}

/**
 * Runs program `name`: its bundle, or `sourceEntry` (relative to the repository) through tsx;
 * either way calls its export `exportName` with the command-line arguments and exits with the code
 * that returns.
 */
export async function launch(name, sourceEntry, exportName) {
  try {
    const pick = pickBundle(ROOT, name);
    let program;
    if (pick.file !== undefined) {
      // Node 22.1+ keeps V8's compiled code on disk between runs; Node 20 has no such cache.
      const { enableCompileCache } = await import('node:module');
      enableCompileCache?.();
      program = await import(pathToFileURL(pick.file).href);
    } else {
      process.stderr.write(
        `${name}: ${pick.reason}: running the TypeScript sources through tsx (a slower start; \`npm run build\` makes it fast again)\n`,
      );
      const { register } = await import('tsx/esm/api');
      register();
      program = await import(pathToFileURL(`${ROOT}${sourceEntry}`).href);
    }
    process.exitCode = await program[exportName](process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${name}: ${err && err.stack ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  }
}
