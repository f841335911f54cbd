/**
 * A job whose target URL is `worker:<pool>` (optionally `?tags=a,b`) is not POSTed anywhere: its
 * runs are leased to pull-based workers of that pool (worker-hub.ts) that offer every listed
 * tag. The target stays a URL so that a job's definition, its storage by column and its log
 * entries are the same for both kinds; only delivery and validation branch on the scheme.
 */
import type { FieldViolation } from '../base/errors.js';

export const WORKER_SCHEME = 'worker:';
/** Pool and tag names: lower-case letters, digits, `.`, `_`, `-`; 1–64 characters. */
export const WORKER_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
export const WORKER_TAGS_MAX = 16;
/** Why a pool or tag name breaks WORKER_NAME. */
export const WORKER_NAME_RULE =
  "must be 1-64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit";

export interface WorkerTarget {
  readonly pool: string;
  /** Every tag a worker must offer to be leased this job's runs; sorted, no repeats. */
  readonly tags: readonly string[];
}

export function isWorkerUrl(url: string): boolean {
  return url.startsWith(WORKER_SCHEME);
}

const parsed = new Map<string, WorkerTarget | string>();
const PARSED_MAX = 10_000;

/** The worker target a `worker:` URL names, or why it names none (memoised: asked per attempt). */
export function parseWorkerUrl(url: string): WorkerTarget | string {
  const had = parsed.get(url);
  if (had !== undefined) return had;
  const result = parseOnce(url);
  if (parsed.size >= PARSED_MAX) parsed.clear();
  parsed.set(url, result);
  return result;
}

function parseOnce(url: string): WorkerTarget | string {
  if (!isWorkerUrl(url)) return `must start with ${WORKER_SCHEME}`;
  const rest = url.slice(WORKER_SCHEME.length);
  const q = rest.indexOf('?');
  const pool = q < 0 ? rest : rest.slice(0, q);
  if (!WORKER_NAME.test(pool)) {
    return `worker pool "${pool}" ${WORKER_NAME_RULE}`;
  }
  if (q < 0) return { pool, tags: [] };
  const query = rest.slice(q + 1);
  if (!query.startsWith('tags=') || query.includes('&')) {
    return 'the only query a worker target takes is ?tags=a,b';
  }
  const tags = query.slice('tags='.length).split(',');
  if (tags.length > WORKER_TAGS_MAX) return `at most ${WORKER_TAGS_MAX} tags`;
  for (const t of tags) {
    if (!WORKER_NAME.test(t)) {
      return `tag "${t}" ${WORKER_NAME_RULE}`;
    }
  }
  const unique = [...new Set(tags)].sort();
  if (unique.length !== tags.length) return 'tags must not repeat';
  return { pool, tags: unique };
}

/** The violations of a worker target: its URL, and no headers (there is no HTTP request). */
export function workerTargetViolations(
  url: string,
  headers: Readonly<Record<string, string>>,
  prefix = '',
): FieldViolation[] {
  const violations: FieldViolation[] = [];
  const target = parseWorkerUrl(url);
  if (typeof target === 'string') violations.push({ field: `${prefix}target.url`, reason: target });
  if (Object.keys(headers).length > 0) {
    violations.push({
      field: `${prefix}target.headers`,
      reason: 'a worker target takes no headers (its runs are leased, not sent over HTTP)',
    });
  }
  return violations;
}

/** Whether a worker offering `offered` (sorted or not) may take runs that need `needed`. */
export function offersAll(offered: ReadonlySet<string>, needed: readonly string[]): boolean {
  for (const t of needed) if (!offered.has(t)) return false;
  return true;
}
