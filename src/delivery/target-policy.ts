/**
 * Which addresses a webhook may reach: the guard against server-side request forgery (docs/API.md,
 * "Targets a webhook may not reach"). A job's URL is chosen by whoever can create jobs, and the
 * request leaves from inside the cluster's network, so by default it may not go to the node
 * itself, the private network around it or the cloud metadata service:
 *
 * - loopback 127.0.0.0/8, ::1; unspecified 0.0.0.0/8, ::;
 * - private (RFC 1918) 10/8, 172.16/12, 192.168/16; unique-local fc00::/7;
 * - link-local 169.254.0.0/16 (where metadata services answer), fe80::/10;
 * - shared address space (carrier-grade NAT, RFC 6598) 100.64.0.0/10;
 * - multicast 224.0.0.0/4, ff00::/8; the broadcast address 255.255.255.255;
 * - an IPv6 address that embeds one of those IPv4 addresses: IPv4-mapped (::ffff:127.0.0.1),
 *   IPv4-compatible (::127.0.0.1) and NAT64 (64:ff9b::/96).
 *
 * An operator widens it with `--allow-target CIDR` (a test cluster's loopback sinks, an internal
 * receiver): an address inside an allowed range is allowed whatever its kind.
 *
 * No I/O and no clock: ranges are matched with node:net's BlockList, addresses parsed here. The
 * API checks literal addresses (and `localhost`) when a job is created; the origin pools check
 * the addresses a name resolves to right before they connect (guarded-connect.ts).
 */
import { BlockList, isIP } from 'node:net';
import { ValidationError } from '../base/errors.js';

/** The code of a bad `--allow-target` list given to TargetPolicy.of. */
export const TARGET_POLICY_INVALID = 'TARGET_POLICY_INVALID';

/** Why an address is refused. */
export type ForbiddenKind =
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'unique-local'
  | 'cgnat'
  | 'multicast'
  | 'unspecified'
  | 'broadcast';

/** The kind as a noun phrase, for messages. */
export const FORBIDDEN_KIND_TEXT: Readonly<Record<ForbiddenKind, string>> = {
  loopback: 'a loopback address',
  private: 'a private (RFC 1918) address',
  'link-local': 'a link-local address',
  'unique-local': 'a unique-local (fc00::/7) address',
  cgnat: 'a carrier-grade NAT (100.64.0.0/10, RFC 6598) address',
  multicast: 'a multicast address',
  unspecified: 'an unspecified address',
  broadcast: 'the broadcast address',
};

/** The ranges refused by default, by kind. */
export const FORBIDDEN_RANGES: readonly (readonly [ForbiddenKind, string])[] = [
  ['loopback', '127.0.0.0/8'],
  ['loopback', '::1/128'],
  ['unspecified', '0.0.0.0/8'],
  ['unspecified', '::/128'],
  ['private', '10.0.0.0/8'],
  ['private', '172.16.0.0/12'],
  ['private', '192.168.0.0/16'],
  ['unique-local', 'fc00::/7'],
  ['link-local', '169.254.0.0/16'],
  ['link-local', 'fe80::/10'],
  ['cgnat', '100.64.0.0/10'],
  ['multicast', '224.0.0.0/4'],
  ['multicast', 'ff00::/8'],
  ['broadcast', '255.255.255.255/32'],
];

/** A parsed CIDR range: its network address (host bits zero), prefix length and family. */
export interface Cidr {
  readonly address: string;
  readonly prefix: number;
  readonly family: 4 | 6;
}

/** The canonical text of a range, e.g. `127.0.0.0/8`, `fd00::/8`. */
export function formatCidr(c: Cidr): string {
  return `${c.address}/${c.prefix}`;
}

/**
 * One refused address: what was checked, its kind, and, for an IPv6 address that embeds an IPv4
 * one, that IPv4 address and the form of the embedding.
 */
export interface TargetRefusal {
  readonly address: string;
  readonly kind: ForbiddenKind;
  readonly embedded?: { readonly form: EmbeddingForm; readonly ipv4: string };
}

export type EmbeddingForm = 'IPv4-mapped' | 'IPv4-compatible' | 'NAT64';

/**
 * "a loopback address 127.0.0.1", "a loopback address ::ffff:7f00:1 (IPv4-mapped 127.0.0.1)",
 * "a link-local address 169.254.169.254 (where cloud metadata services answer)".
 */
export function describeRefusal(r: TargetRefusal): string {
  const via = r.embedded === undefined ? '' : ` (${r.embedded.form} ${r.embedded.ipv4})`;
  const note = r.kind === 'link-local' ? ' (where cloud metadata services answer)' : '';
  return `${FORBIDDEN_KIND_TEXT[r.kind]} ${r.address}${via}${note}`;
}

/** The advice every refusal ends with. */
export const ALLOW_TARGET_ADVICE =
  'which webhooks may not reach; a node started with --allow-target covering it may';

/**
 * The field violation's reason for a URL host refused at create time: a literal address, or a
 * name such as `localhost` that always resolves to loopback.
 */
export function hostRefusalReason(host: string, r: TargetRefusal): string {
  if (isIP(unbracket(host)) !== 0)
    return `resolves to ${describeRefusal(r)}, ${ALLOW_TARGET_ADVICE}`;
  return `${host} is a name that always resolves to ${FORBIDDEN_KIND_TEXT[r.kind]}, ${ALLOW_TARGET_ADVICE}`;
}

/** Parses `a.b.c.d/n`, `x::y/n`, or a bare address (a range of one); a string says what is wrong. */
export function parseCidr(text: string): Cidr | string {
  const trimmed = text.trim();
  const slash = trimmed.indexOf('/');
  const addressText = slash < 0 ? trimmed : trimmed.slice(0, slash);
  const prefixText = slash < 0 ? undefined : trimmed.slice(slash + 1);
  const example = 'e.g. 127.0.0.0/8 or fd00::/8';
  if (addressText.includes('%')) return `'${text}' carries a zone (%…); give the range alone`;
  const family = isIP(addressText);
  if (family !== 4 && family !== 6) return `'${text}' is not an IP range (${example})`;
  const bits = family === 4 ? 32 : 128;
  let prefix = bits;
  if (prefixText !== undefined) {
    if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > bits) {
      return `'${text}' has a prefix length that is not an integer in [0, ${bits}]`;
    }
    prefix = Number(prefixText);
  }
  const bytes = parseAddress(addressText)!;
  const network = maskBytes(bytes, prefix);
  if (!sameBytes(bytes, network)) {
    const suggestion = `${formatBytes(network)}/${prefix}`;
    return `'${text}' has bits set past its /${prefix} prefix (did you mean ${suggestion}?)`;
  }
  return { address: formatBytes(network), prefix, family };
}

/**
 * Parses a list of ranges (each entry may itself be a comma list); every bad entry is named.
 * @returns the ranges, or the reasons (one per bad entry)
 */
export function parseCidrList(
  entries: readonly string[],
): { ok: true; ranges: Cidr[] } | { ok: false; reasons: string[] } {
  const ranges: Cidr[] = [];
  const reasons: string[] = [];
  for (const entry of entries) {
    for (const part of entry.split(',')) {
      if (part.trim() === '') {
        reasons.push(`'${entry}' holds an empty range (e.g. 127.0.0.0/8 or fd00::/8)`);
        continue;
      }
      const parsed = parseCidr(part);
      if (typeof parsed === 'string') reasons.push(parsed);
      else ranges.push(parsed);
    }
  }
  return reasons.length > 0 ? { ok: false, reasons } : { ok: true, ranges };
}

const FORBIDDEN_LISTS: ReadonlyMap<ForbiddenKind, BlockList> = buildForbiddenLists();

function buildForbiddenLists(): Map<ForbiddenKind, BlockList> {
  const lists = new Map<ForbiddenKind, BlockList>();
  for (const [kind, text] of FORBIDDEN_RANGES) {
    const c = parseCidr(text) as Cidr;
    let list = lists.get(kind);
    if (list === undefined) lists.set(kind, (list = new BlockList()));
    list.addSubnet(c.address, c.prefix, c.family === 4 ? 'ipv4' : 'ipv6');
  }
  return lists;
}

/** The addresses webhooks may reach: everything but the forbidden ranges, widened by `allowed`. */
export class TargetPolicy {
  /** The default: nothing widened. */
  static readonly STRICT = new TargetPolicy([]);

  readonly allowed: readonly Cidr[];
  private readonly allowList = new BlockList();

  constructor(allowed: readonly Cidr[]) {
    this.allowed = Object.freeze([...allowed]);
    for (const c of this.allowed)
      this.allowList.addSubnet(c.address, c.prefix, c.family === 4 ? 'ipv4' : 'ipv6');
  }

  /**
   * A policy from CIDR texts (each may be a comma list).
   * @throws ValidationError TARGET_POLICY_INVALID naming `allowTarget` and each bad entry
   */
  static of(ranges: readonly string[]): TargetPolicy {
    const parsed = parseCidrList(ranges);
    if (!parsed.ok) {
      throw new ValidationError(
        TARGET_POLICY_INVALID,
        parsed.reasons.map((reason) => ({ field: 'allowTarget', reason })),
      );
    }
    return new TargetPolicy(parsed.ranges);
  }

  /**
   * Why an IP address (v4 or v6, brackets and a zone allowed) may not be reached, or undefined
   * when it may. A text that is not an IP address is refused as unspecified: the caller resolves
   * names first.
   */
  checkAddress(text: string): TargetRefusal | undefined {
    const address = unbracket(text).replace(/%.*$/, '');
    const family = isIP(address);
    if (family !== 4 && family !== 6) return { address: text, kind: 'unspecified' };
    if (this.isAllowed(address, family)) return undefined;
    if (family === 6) {
      const bytes = parseAddress(address)!;
      const embedded = embeddedIPv4(bytes);
      if (embedded !== undefined) {
        if (this.isAllowed(embedded.ipv4, 4)) return undefined;
        const kind = forbiddenKind(embedded.ipv4, 4);
        return kind === undefined ? undefined : { address, kind, embedded };
      }
    }
    const kind = forbiddenKind(address, family);
    return kind === undefined ? undefined : { address, kind };
  }

  /**
   * The create-time check of a URL's host (as `new URL().hostname` spells it): a literal address
   * is checked at once; `localhost` and `*.localhost` always resolve to loopback (RFC 6761), so
   * they are refused unless loopback is allowed. Any other name passes here: what it resolves to
   * is checked when the pools connect.
   */
  checkHost(hostname: string): TargetRefusal | undefined {
    const host = unbracket(hostname);
    if (isIP(host) !== 0) return this.checkAddress(host);
    const name = host.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost' || name.endsWith('.localhost')) {
      if (this.isAllowed('127.0.0.1', 4) || this.isAllowed('::1', 6)) return undefined;
      return { address: hostname, kind: 'loopback' };
    }
    return undefined;
  }

  private isAllowed(address: string, family: 4 | 6): boolean {
    return this.allowed.length > 0 && this.allowList.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

function forbiddenKind(address: string, family: 4 | 6): ForbiddenKind | undefined {
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const [kind, list] of FORBIDDEN_LISTS) if (list.check(address, type)) return kind;
  return undefined;
}

/** `[::1]` → `::1`; anything else unchanged. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** The IPv4 address an IPv6 one carries in its last 32 bits, for the three embeddings known. */
function embeddedIPv4(b: Uint8Array): TargetRefusal['embedded'] {
  const zeroUpTo = (n: number): boolean => b.subarray(0, n).every((x) => x === 0);
  const ipv4 = `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  if (zeroUpTo(10) && b[10] === 0xff && b[11] === 0xff) return { form: 'IPv4-mapped', ipv4 };
  // ::/96 but not :: and ::1 themselves (unspecified and loopback in their own right).
  if (zeroUpTo(12) && !(zeroUpTo(15) && (b[15] === 0 || b[15] === 1)))
    return { form: 'IPv4-compatible', ipv4 };
  // 64:ff9b::/96, the NAT64 well-known prefix (RFC 6052).
  if (
    b[0] === 0x00 &&
    b[1] === 0x64 &&
    b[2] === 0xff &&
    b[3] === 0x9b &&
    b.subarray(4, 12).every((x) => x === 0)
  )
    return { form: 'NAT64', ipv4 };
  return undefined;
}

/** The bytes of an IPv4 (4) or IPv6 (16) address already known to be valid (isIP). */
function parseAddress(text: string): Uint8Array | undefined {
  const family = isIP(text);
  if (family === 4) return Uint8Array.from(text.split('.').map(Number));
  if (family !== 6) return undefined;
  let rest = text;
  const out = new Uint8Array(16);
  // A dotted IPv4 tail (::ffff:1.2.3.4) fills the last four bytes.
  let tail: number[] = [];
  const lastColon = rest.lastIndexOf(':');
  if (rest.slice(lastColon + 1).includes('.')) {
    tail = rest
      .slice(lastColon + 1)
      .split('.')
      .map(Number);
    rest = `${rest.slice(0, lastColon + 1)}0:0`;
  }
  const [head, tailGroups] = rest.includes('::') ? rest.split('::') : [rest, undefined];
  const groups = (s: string | undefined): number[] =>
    s === undefined || s === '' ? [] : s.split(':').map((g) => parseInt(g, 16));
  const front = groups(head);
  const back = groups(tailGroups);
  const all = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  all.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  if (tail.length === 4) out.set(tail, 12);
  return out;
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - 8 * i));
    out[i] = bytes[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Dotted quad, or RFC 5952 text: lower-case hex, the longest run of two or more zero groups as ::. */
function formatBytes(b: Uint8Array): string {
  if (b.length === 4) return b.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((b[i]! << 8) | b[i + 1]!);
  let bestAt = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestAt = i;
      bestLen = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestAt < 0) return hex.join(':');
  return `${hex.slice(0, bestAt).join(':')}::${hex.slice(bestAt + bestLen).join(':')}`;
}
