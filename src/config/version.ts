/**
 * The version of tickraft as package.json states it, for `tickctl --version` and
 * `tickraft --version`. Found by walking up from this module, so the answer is the same whether
 * the sources run through tsx or as compiled JavaScript in another directory.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function packageVersion(): string {
  if (cached !== undefined) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'tickraft' && typeof pkg.version === 'string') return (cached = pkg.version);
    }
    const up = dirname(dir);
    if (up === dir) return (cached = 'unknown');
    dir = up;
  }
}
