/**
 * host:port parsing for proxy listen and upstream addresses. This server runs beside test
 * clusters on one machine, so it binds and dials loopback addresses only (127.0.0.0/8, ::1,
 * localhost); anything else is refused rather than exposed.
 */
import { isIP } from 'node:net';

export interface Address {
  readonly host: string;
  readonly port: number;
}

/** `host:port` or `[v6]:port`; a string describing the problem otherwise. */
export function parseAddress(text: string): Address | string {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  if (!m) return `address ${text}: must be host:port`;
  const port = Number(m[3]);
  if (port > 65535) return `address ${text}: invalid port`;
  return { host: m[1] ?? m[2]!, port };
}

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/** The form Go prints a bound TCP address in: 127.0.0.1:8474, [::1]:8474. */
export function formatAddress(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Same text for the same endpoint: localhost is written as the address it binds. */
export function normalizeAddress(text: string): string {
  const a = parseAddress(text);
  if (typeof a === 'string') return text;
  return formatAddress(a.host === 'localhost' ? '127.0.0.1' : a.host, a.port);
}
