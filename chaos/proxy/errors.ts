/**
 * Errors of the Toxiproxy-compatible server. Each carries the HTTP status Toxiproxy answers with
 * and the exact message text of its api.go, because clients (toxiproxy-node-client among them)
 * look only at the status and people read the message: `{"error": message, "status": status}`.
 */
import { TickraftError } from '../../src/base/errors.js';

export const PROXY_BAD_REQUEST = 'PROXY_BAD_REQUEST';
export const PROXY_NOT_FOUND = 'PROXY_NOT_FOUND';
export const PROXY_EXISTS = 'PROXY_EXISTS';
export const TOXIC_NOT_FOUND = 'PROXY_TOXIC_NOT_FOUND';
export const TOXIC_EXISTS = 'PROXY_TOXIC_EXISTS';
export const PROXY_LISTEN_FAILED = 'PROXY_LISTEN_FAILED';

const STATUS_OF: Readonly<Record<string, number>> = {
  [PROXY_BAD_REQUEST]: 400,
  [PROXY_NOT_FOUND]: 404,
  [PROXY_EXISTS]: 409,
  [TOXIC_NOT_FOUND]: 404,
  [TOXIC_EXISTS]: 409,
  // Toxiproxy has no status for a failed bind: it becomes a 500 carrying the raw message.
  [PROXY_LISTEN_FAILED]: 500,
};

export class ProxyApiError extends TickraftError {
  override readonly name = 'ProxyApiError';
  /** The HTTP status Toxiproxy answers this error with. */
  readonly status: number;

  constructor(code: string, message: string, options: { cause?: unknown } = {}) {
    super(code, message, options);
    this.status = STATUS_OF[code] ?? 500;
  }
}

export const badRequest = (message: string): ProxyApiError =>
  new ProxyApiError(PROXY_BAD_REQUEST, message);
export const proxyNotFound = (): ProxyApiError =>
  new ProxyApiError(PROXY_NOT_FOUND, 'proxy not found');
export const toxicNotFound = (): ProxyApiError =>
  new ProxyApiError(TOXIC_NOT_FOUND, 'toxic not found');
