/**
 * Temporary directories for tests that touch the disk: created under os.tmpdir() and removed
 * when the test ends, whether it passed or not.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Teardown {
  teardown(fn: () => void | Promise<void>): void;
}

export function tempDir(t: Teardown, label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `tickraft-${label}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
