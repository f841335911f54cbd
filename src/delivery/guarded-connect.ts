/**
 * The connect step of the webhook pools, with the target policy (target-policy.ts) applied to
 * the address a connection actually goes to. Checking a job's URL when it is created is not
 * enough: a name can resolve to 127.0.0.1, or be re-bound to it after the check (DNS
 * rebinding). So every new connection is checked here, at connect time:
 *
 * - a literal address in the URL is checked before anything is opened;
 * - a name is resolved by this module's lookup, every address it returned is checked, and the
 *   socket connects only to those addresses: the lookup is handed to net.connect / tls.connect
 *   (undici's connector spreads its options into theirs), so Node never resolves the name a
 *   second time behind the check. TLS still verifies the certificate against the name
 *   (servername stays the URL's host).
 *
 * A refusal fails the connection with a DeliveryError TARGET_FORBIDDEN before any socket is
 * opened: every request waiting for that connection fails with it, and classify.ts makes it a
 * final, provably undelivered failure (it is never retried: the next attempt would be refused
 * the same way).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { buildConnector } from 'undici';
import { DeliveryError } from './errors.js';
import {
  ALLOW_TARGET_ADVICE,
  describeRefusal,
  unbracket,
  type TargetPolicy,
  type TargetRefusal,
} from './target-policy.js';

/** Resolves a name to every address it has (dns.lookup with `all: true` by default). */
export type ResolveAll = (hostname: string, family: 0 | 4 | 6) => Promise<LookupAddress[]>;

export interface GuardedConnectOptions {
  readonly policy: TargetPolicy;
  /** TCP (and TLS) connect timeout, ms. */
  readonly timeoutMs: number;
  /** The resolver (a test seam). @default dns.lookup, all addresses */
  readonly resolve?: ResolveAll;
}

/** The OS resolver, as net.connect would use it, all addresses at once. */
export const systemResolveAll: ResolveAll = (hostname, family) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, family }, (err, addresses) => {
      if (err) reject(err);
      else resolve(addresses);
    });
  });

/** The error a refused connection fails with. */
export function targetForbiddenError(host: string, refusal: TargetRefusal): DeliveryError {
  const literal = isIP(unbracket(host)) !== 0;
  const what = literal
    ? `${host} is ${describeRefusal(refusal)}`
    : `${host} resolved to ${describeRefusal(refusal)}`;
  return new DeliveryError('TARGET_FORBIDDEN', `${what}, ${ALLOW_TARGET_ADVICE}`, {
    outcome: 'fail',
  });
}

/** An undici connector (Pool's `connect` option) that refuses forbidden targets. */
export function guardedConnector(options: GuardedConnectOptions): buildConnector.connector {
  const { policy } = options;
  const resolve = options.resolve ?? systemResolveAll;
  const base = buildConnector({
    timeout: options.timeoutMs,
    lookup: guardedLookup(policy, resolve),
  });
  return (connectOptions, callback) => {
    // undici passes an IPv6 literal without its brackets; accept both.
    const host = unbracket(connectOptions.hostname);
    if (isIP(host) !== 0) {
      // Node connects to a literal without calling the lookup: checked here.
      const refusal = policy.checkAddress(host);
      if (refusal !== undefined) {
        // Asynchronously, as a socket error would come: undici is still inside its connect call.
        const err = targetForbiddenError(host, refusal);
        process.nextTick(() => callback(err, null));
        return;
      }
    }
    base(connectOptions, callback);
  };
}

/**
 * The lookup net.connect calls for a name: resolves it, refuses it when any address it has is
 * forbidden, and otherwise answers with those addresses, in the form net asked for (one address,
 * or all of them for happy eyeballs). A resolver failure passes through unchanged (ENOTFOUND and
 * friends are classified as DNS failures).
 */
function guardedLookup(policy: TargetPolicy, resolve: ResolveAll): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    const family =
      lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : 0;
    resolve(hostname, family).then(
      (addresses) => {
        for (const a of addresses) {
          const refusal = policy.checkAddress(a.address);
          if (refusal !== undefined) {
            callback(targetForbiddenError(hostname, refusal), '', 0);
            return;
          }
        }
        const wanted = addresses.filter((a) => family === 0 || a.family === family);
        const first = wanted[0];
        if (first === undefined) {
          const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
          err.code = 'ENOTFOUND';
          callback(err, '', 0);
        } else if (lookupOptions.all === true) {
          callback(null, wanted);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
}
