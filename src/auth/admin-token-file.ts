/**
 * The bootstrap admin token: read once at start from --admin-token-file (the same file on every
 * node, as a cluster's initial management token). The file holds the token on its first line;
 * surrounding whitespace is ignored. A token must be long enough that it cannot be guessed.
 */
import { readFileSync, statSync } from 'node:fs';
import { ValidationError } from '../base/errors.js';

/** At least 128 bits when written as hex (`openssl rand -hex 32` writes 256). */
export const ADMIN_TOKEN_MIN_CHARS = 32;

export interface AdminTokenFile {
  readonly token: string;
  /** True when the file can be read by other users (the node warns at start). */
  readonly readableByOthers: boolean;
}

export function readAdminTokenFile(path: string): AdminTokenFile {
  const bad = (reason: string): never => {
    throw new ValidationError('CONFIG_INVALID', [{ field: '--admin-token-file', reason }]);
  };
  let text = '';
  let mode = 0;
  try {
    text = readFileSync(path, 'utf8');
    mode = statSync(path).mode;
  } catch (err) {
    bad(`cannot read ${path}: ${(err as Error).message}`);
  }
  const token = text.trim();
  if (token === '') bad(`${path} is empty`);
  if (/\s/.test(token)) bad(`${path} must hold one token on one line, with no spaces inside`);
  if (!/^[\x21-\x7e]+$/.test(token)) bad(`${path} must hold printable ASCII only`);
  if (token.length < ADMIN_TOKEN_MIN_CHARS)
    bad(
      `the token in ${path} has ${token.length} characters; at least ${ADMIN_TOKEN_MIN_CHARS} are needed`,
    );
  return { token, readableByOthers: (mode & 0o077) !== 0 };
}
