/**
 * How TLS credentials are built, in one place, for every gRPC server and client of the project:
 * the client API's server (and the node-to-node forwarding and join clients that dial it), the
 * peer transport (mutual TLS), and the TypeScript ApiClient, Worker and tickctl.
 *
 * Inside a node, material lives in a TlsSource, which `tickraft serve` replaces on SIGHUP
 * (certificate renewal, a CA rotation): a server built from it with serverCredentials() hands
 * its new certificate to the next handshake, and a channel built with channelCredentials()
 * presents and trusts the new material at its next connection. Connections already up keep what
 * they were opened with. Clients that live for one command (tickctl) take plain buffers through
 * clientCredentials().
 *
 * Verification is gRPC's and Node's own: a server certificate must chain to the CA given (the
 * system's roots when none is) and name the host the client dialled (DNS or IP
 * subjectAltName); a server that requires client certificates refuses a client whose
 * certificate does not chain to its CA, or that presents none.
 */
import * as grpc from '@grpc/grpc-js';
import type { SecureServerOptions } from 'node:http2';
import { isIP } from 'node:net';
import { connect, rootCertificates, type SecureContextOptions } from 'node:tls';
import { TickraftError } from '../base/errors.js';

/** PEM bytes: a certificate (chain), its private key, and the CA bundle to verify the other end. */
export interface TlsMaterial {
  /** This end's certificate, leaf first, then any intermediates. */
  readonly cert?: Buffer;
  /** The private key of `cert`. */
  readonly key?: Buffer;
  /** CA certificates trusted to sign the other end's certificate; absent: the system's roots. */
  readonly ca?: Buffer;
}

/** TLS for a client of the public API (ApiClient, Worker, tickctl): PEM buffers. */
export interface ClientTlsOptions {
  /** CA certificates that signed the nodes' API certificates; absent: the system's roots. */
  readonly ca?: Buffer;
  /** A client certificate, for a cluster that requires them (`--tls-client-ca`); needs `key`. */
  readonly cert?: Buffer;
  /** The private key of `cert`. */
  readonly key?: Buffer;
}

export const TLS_OPTIONS_INVALID = 'TLS_OPTIONS_INVALID';
export const PEER_TLS_UNVERIFIED = 'PEER_TLS_UNVERIFIED';

/** TLS options that cannot work (a certificate without its key); names the field. */
export class TlsOptionsError extends TickraftError {
  override readonly name = 'TlsOptionsError';
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(TLS_OPTIONS_INVALID, `${field}: ${reason}`, { details: { field, reason } });
  }
}

/** A TLS handshake with a node's peer address did not verify (probeTls). */
export class PeerTlsError extends TickraftError {
  override readonly name = 'PeerTlsError';
}

type CaListener = grpc.experimental.CaCertificateUpdateListener;
type IdentityListener = grpc.experimental.IdentityCertificateUpdateListener;

/**
 * The current TLS material of one listener or dialer, replaced whole by update(). It is also a
 * grpc-js CertificateProvider, which is how channels built from it see the new material (its
 * listeners are told at once, also when they subscribe).
 */
export class TlsSource implements grpc.experimental.CertificateProvider {
  private current: TlsMaterial;
  private readonly changeListeners = new Set<(m: TlsMaterial) => void>();
  private readonly caListeners = new Set<CaListener>();
  private readonly identityListeners = new Set<IdentityListener>();

  constructor(material: TlsMaterial) {
    checkPair(material, '');
    this.current = material;
  }

  get material(): TlsMaterial {
    return this.current;
  }

  /** Replaces the material; servers and channels built from this source use it from now on. */
  update(material: TlsMaterial): void {
    checkPair(material, '');
    this.current = material;
    for (const l of this.changeListeners) l(material);
    for (const l of this.caListeners) l(this.caUpdate());
    for (const l of this.identityListeners) l(this.identityUpdate());
  }

  /** Calls `listener` after every update(); returns the unsubscribe function. */
  onChange(listener: (m: TlsMaterial) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private caUpdate(): grpc.experimental.CaCertificateUpdate {
    // No CA given: the system's roots, as any TLS client trusts by default.
    return { caCertificate: this.current.ca ?? systemRoots() };
  }

  private identityUpdate(): grpc.experimental.IdentityCertificateUpdate | null {
    const { cert, key } = this.current;
    return cert !== undefined && key !== undefined ? { certificate: cert, privateKey: key } : null;
  }

  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener);
    listener(this.caUpdate());
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener);
    listener(this.identityUpdate());
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener);
  }
}

let roots: Buffer | undefined;
function systemRoots(): Buffer {
  roots ??= Buffer.from(rootCertificates.join('\n'));
  return roots;
}

function checkPair(m: TlsMaterial, prefix: string): void {
  if (m.cert !== undefined && m.key === undefined)
    throw new TlsOptionsError(`${prefix}key`, 'is required with a certificate');
  if (m.key !== undefined && m.cert === undefined)
    throw new TlsOptionsError(`${prefix}cert`, 'is required with a private key');
}

/** What the secure context of a server needs from `m`: its identity, and the CA for clients. */
function serverContext(m: TlsMaterial, requireClientCert: boolean): SecureContextOptions {
  return {
    cert: m.cert,
    key: m.key,
    ...(requireClientCert && m.ca !== undefined ? { ca: m.ca } : {}),
  };
}

/**
 * grpc-js server credentials whose secure context follows a TlsSource: grpc-js's server watches
 * its credentials and sets the new context on its listener when they change. (The experimental
 * certificate-provider server credentials of grpc-js 1.14 miss a provider that answers at once,
 * and createSsl cannot change; this is the base class's own update path.)
 */
class SourceServerCredentials extends grpc.ServerCredentials {
  constructor(source: TlsSource, requireClientCert: boolean) {
    const constructorOptions: SecureServerOptions = {
      requestCert: requireClientCert,
      rejectUnauthorized: requireClientCert,
    };
    super(constructorOptions, serverContext(source.material, requireClientCert));
    source.onChange((m) => this.updateSecureContextOptions(serverContext(m, requireClientCert)));
  }

  override _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

/**
 * Server credentials from `source` (which must hold a certificate and key). With
 * `requireClientCert`, every client must present a certificate that chains to `source`'s CA.
 */
export function serverCredentials(
  source: TlsSource,
  requireClientCert: boolean,
): grpc.ServerCredentials {
  if (source.material.cert === undefined)
    throw new TlsOptionsError('cert', 'a TLS server needs a certificate and key');
  if (requireClientCert && source.material.ca === undefined)
    throw new TlsOptionsError('ca', 'requiring client certificates needs the CA that signs them');
  return new SourceServerCredentials(source, requireClientCert);
}

/**
 * Channel credentials from `source` for a node's own dialers (forwarding, the peer transport):
 * the server's certificate must chain to `source`'s CA and name the dialled host; `source`'s
 * certificate is presented when the server asks for one. New connections use the material
 * current at the time.
 */
export function channelCredentials(source: TlsSource): grpc.ChannelCredentials {
  const identity = source.material.cert !== undefined ? source : null;
  return grpc.experimental.createCertificateProviderChannelCredentials(source, identity);
}

/** Channel credentials for a client of the public API: TLS with `tls`, plaintext without. */
export function clientCredentials(tls: ClientTlsOptions | undefined): grpc.ChannelCredentials {
  if (tls === undefined) return grpc.credentials.createInsecure();
  checkPair(tls, 'tls.');
  return grpc.credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null);
}

/**
 * Opens a TLS connection to `address` (host:port) with `material` (mutual TLS: its certificate
 * is presented), checks that the server's certificate chains to `material`'s CA and names the
 * host, and closes it. Rejects with a PeerTlsError saying why not.
 */
export function probeTls(address: string, material: TlsMaterial, timeoutMs: number): Promise<void> {
  const m = /^\[?([^\]]+)\]?:(\d+)$/.exec(address);
  if (m === null)
    return Promise.reject(new PeerTlsError(PEER_TLS_UNVERIFIED, `${address} is not host:port`));
  const host = m[1]!;
  const port = Number(m[2]);
  return new Promise<void>((resolve, reject) => {
    const socket = connect({
      host,
      port,
      // SNI carries host names only (RFC 6066); an IP is still checked against the IP SANs.
      ...(isIP(host) === 0 ? { servername: host } : {}),
      ca: material.ca ?? systemRoots(),
      cert: material.cert,
      key: material.key,
      ALPNProtocols: ['h2'],
      rejectUnauthorized: true,
    });
    const fail = (reason: string): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(new PeerTlsError(PEER_TLS_UNVERIFIED, `TLS handshake with ${address}: ${reason}`));
    };
    const timer = setTimeout(() => fail(`no handshake within ${timeoutMs} ms`), timeoutMs);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      if (!socket.authorized) {
        fail(String(socket.authorizationError));
        return;
      }
      socket.end();
      resolve();
    });
    socket.once('error', (err: Error) => fail(err.message));
  });
}
