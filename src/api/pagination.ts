/**
 * Page tokens and the merge of per-group pages. Tokens are keyset positions ("after this key"),
 * not offsets, so a page boundary stays put while jobs are created or deleted elsewhere in the
 * list; they name their list and scope, so a token of one list is refused by another.
 *
 * Cross-group lists: every group answers its first `pageSize` items after the position, in the
 * list's order. The merged page is the first `pageSize` of their union. It is complete: an item
 * a group left out comes after that group's last returned item, which is not before the merged
 * page's last item (the page's last is the pageSize-th smallest of a union that holds the
 * group's pageSize items).
 */
import { ValidationError } from '../base/errors.js';

export const PAGE_SIZE_DEFAULT = 100;
export const PAGE_SIZE_MAX = 1000;

export type ListKind = 'jobs' | 'runs' | 'dead' | 'tenants';

interface TokenBody {
  readonly v: 1;
  readonly k: ListKind;
  /** The list's scope: tenant or job id. */
  readonly s: string;
  /** The keyset position: the last key of the previous page. */
  readonly a: unknown;
}

export function encodePageToken(kind: ListKind, scope: string, after: unknown): string {
  const body: TokenBody = { v: 1, k: kind, s: scope, a: after };
  return Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** The position a token holds, or undefined for the first page. */
export function decodePageToken(kind: ListKind, scope: string, token: string): unknown {
  if (token === '') return undefined;
  const invalid = (reason: string): ValidationError =>
    new ValidationError('REQUEST_INVALID', [{ field: 'pageToken', reason }]);
  let body: Partial<TokenBody>;
  try {
    body = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Partial<TokenBody>;
  } catch {
    throw invalid('is not a page token this API returned');
  }
  if (typeof body !== 'object' || body === null || body.v !== 1 || body.a === undefined)
    throw invalid('is not a page token this API returned');
  if (body.k !== kind || body.s !== scope)
    throw invalid('belongs to another list or filter; start again without it');
  return body.a;
}

export function pageSizeOf(requested: number): number {
  if (!Number.isSafeInteger(requested) || requested < 0)
    throw new ValidationError('REQUEST_INVALID', [
      {
        field: 'pageSize',
        reason: `must be from 0 (default ${PAGE_SIZE_DEFAULT}) to ${PAGE_SIZE_MAX}`,
      },
    ]);
  if (requested > PAGE_SIZE_MAX)
    throw new ValidationError('REQUEST_INVALID', [
      { field: 'pageSize', reason: `must be at most ${PAGE_SIZE_MAX}` },
    ]);
  return requested === 0 ? PAGE_SIZE_DEFAULT : requested;
}

/** One group's page: its first items after the position, and whether it has more. */
export interface GroupPage<T> {
  readonly items: readonly T[];
  readonly more: boolean;
}

/**
 * Merges per-group pages (each sorted by `compare`) into the first `pageSize` items overall, and
 * says whether anything follows them.
 */
export function mergePages<T>(
  pages: readonly GroupPage<T>[],
  pageSize: number,
  compare: (a: T, b: T) => number,
): { items: T[]; more: boolean } {
  const all = pages.flatMap((p) => p.items).sort(compare);
  const items = all.slice(0, pageSize);
  const more = all.length > pageSize || pages.some((p) => p.more);
  return { items, more: more && items.length > 0 };
}

/** The first `limit` of `sorted` items strictly after the position, and whether more follow. */
export function pageAfter<T>(
  sorted: readonly T[],
  isAfter: (item: T) => boolean,
  limit: number,
): GroupPage<T> {
  const rest = sorted.filter(isAfter);
  return { items: rest.slice(0, limit), more: rest.length > limit };
}

// Orders and positions of each list.

export const byId = (a: { id: string }, b: { id: string }): number =>
  a.id < b.id ? -1 : a.id > b.id ? 1 : 0;

/** DLQ order: most recently dead first, then by fire id. Position: [finishedAtMs, fireId]. */
export type DeadKey = readonly [number, string];

export function compareDead(a: DeadKey, b: DeadKey): number {
  if (a[0] !== b[0]) return b[0] - a[0];
  return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

export function isDeadKey(x: unknown): x is DeadKey {
  return Array.isArray(x) && x.length === 2 && typeof x[0] === 'number' && typeof x[1] === 'string';
}
