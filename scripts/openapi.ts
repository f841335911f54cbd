/**
 * `npm run openapi`: writes src/http/openapi.json, the OpenAPI document of the HTTP/JSON API,
 * from the route table (src/http/routes.ts) and proto/tickraft.proto (src/http/openapi.ts),
 * formatted as prettier formats the repository. Run it after changing either;
 * test/unit/http/openapi.test.ts fails until the file is what this writes.
 * `npm run openapi -- --check` only says whether the file is current (exit 1 if not).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import { buildOpenApi, parseApiProtoWithComments } from '../src/http/openapi.js';

export const OPENAPI_JSON = fileURLToPath(new URL('../src/http/openapi.json', import.meta.url));

/** The document's text as the file should hold it. */
export async function openApiText(): Promise<string> {
  const text = JSON.stringify(buildOpenApi(parseApiProtoWithComments()), null, 2);
  const config = (await prettier.resolveConfig(OPENAPI_JSON)) ?? {};
  return prettier.format(text, { ...config, parser: 'json' });
}

async function main(): Promise<number> {
  const text = await openApiText();
  let current = '';
  try {
    current = readFileSync(OPENAPI_JSON, 'utf8');
  } catch {
    // No file yet: it is written below (or reported stale with --check).
  }
  if (process.argv.includes('--check')) {
    if (current === text) return 0;
    process.stderr.write(`${OPENAPI_JSON} is not current: run npm run openapi\n`);
    return 1;
  }
  if (current !== text) writeFileSync(OPENAPI_JSON, text);
  process.stdout.write(
    `${OPENAPI_JSON}: ${current === text ? 'already current' : 'written'} (${Object.keys((JSON.parse(text) as { paths: object }).paths).length} paths)\n`,
  );
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  process.exitCode = await main();
