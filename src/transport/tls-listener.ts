/**
 * The peer transport's mutual-TLS listener: a Node TLS server that checks each connecting
 * node's certificate itself and hands the connections that pass to the gRPC server (grpc-js's
 * connection injector), instead of grpc-js binding the port with TLS credentials.
 *
 * Why not grpc-js's own TLS listener: it drops a refused handshake without a trace, and a node
 * refusing a peer must say so (which address, what certificate, why) in its log and metrics.
 * Here every connection must present a certificate that chains to the source's CA: one that
 * presents none or another CA's is closed right after the handshake, and reported through
 * `onRefused`. The source's new material applies to the next handshake.
 */
import type * as grpc from '@grpc/grpc-js';
import { createServer, type Server, type TLSSocket } from 'node:tls';
import type { Socket } from 'node:net';
import type { TlsMaterial, TlsSource } from './tls.js';

/** A connection the listener refused, as its log line and metric tell it. */
export interface RefusedPeer {
  /**
   * `certificate`: the handshake completed but the certificate did not verify (another CA's, or
   * none); `handshake`: the handshake itself failed (this node's certificate was refused by the
   * other end, or the other end spoke no TLS).
   */
  readonly kind: 'certificate' | 'handshake';
  /** host:port the connection came from. */
  readonly remote: string;
  /**
   * A code: OpenSSL's verdict on the certificate (e.g. UNABLE_TO_VERIFY_LEAF_SIGNATURE),
   * NO_CERTIFICATE, or the failed handshake's error code (e.g. ECONNRESET).
   */
  readonly reason: string;
  /** The same in words. */
  readonly detail: string;
  /** The certificate's subject and issuer, when one was presented. */
  readonly subject: string;
  readonly issuer: string;
}

function context(m: TlsMaterial): { cert?: Buffer; key?: Buffer; ca?: Buffer } {
  return {
    ...(m.cert !== undefined ? { cert: m.cert } : {}),
    ...(m.key !== undefined ? { key: m.key } : {}),
    ...(m.ca !== undefined ? { ca: m.ca } : {}),
  };
}

/** Where a connection comes from; unknown once the other end has closed it (a hang-up). */
function remoteOf(socket: Socket): string {
  const host = socket.remoteAddress;
  if (host === undefined) return 'unknown (already closed)';
  return `${host.includes(':') ? `[${host}]` : host}:${socket.remotePort ?? 0}`;
}

/** A certificate's subject or issuer as `CN=n1,O=acme`. */
function nameOf(entries: object | undefined): string {
  if (entries === undefined) return '';
  return (Object.entries(entries) as [string, unknown][])
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.map(String).join('+') : String(v)}`)
    .join(',');
}

export class TlsPeerListener {
  private readonly tls: Server;
  private readonly injector: grpc.ConnectionInjector;
  /** Connections not yet handed to gRPC. */
  private readonly handshaking = new Set<Socket>();
  private readonly unsubscribe: () => void;
  private closed = false;

  constructor(
    grpcServer: grpc.Server,
    insecure: grpc.ServerCredentials,
    source: TlsSource,
    private readonly onRefused: (peer: RefusedPeer) => void,
  ) {
    // gRPC sees an already-decrypted stream: its injected HTTP/2 server does no TLS of its own.
    this.injector = grpcServer.createConnectionInjector(insecure);
    this.tls = createServer({
      ...context(source.material),
      // Ask every peer for a certificate, but judge it below, where a refusal can be reported
      // (rejectUnauthorized would close such a connection without a word).
      requestCert: true,
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
    });
    this.unsubscribe = source.onChange((m) => this.tls.setSecureContext(context(m)));
    this.tls.on('connection', (socket: Socket) => {
      this.handshaking.add(socket);
      socket.once('close', () => this.handshaking.delete(socket));
    });
    this.tls.on('secureConnection', (socket: TLSSocket) => {
      if (!socket.authorized) {
        const cert = socket.getPeerCertificate();
        const presented = cert !== null && Object.keys(cert).length > 0;
        const verdict = String(socket.authorizationError);
        this.onRefused({
          kind: 'certificate',
          remote: remoteOf(socket),
          reason: presented ? verdict : 'NO_CERTIFICATE',
          detail: presented
            ? `certificate not verified against the CA: ${verdict}`
            : 'the peer presented no certificate',
          subject: presented ? nameOf(cert.subject) : '',
          issuer: presented ? nameOf(cert.issuer) : '',
        });
        socket.destroy();
        return;
      }
      this.handshaking.delete(socket);
      this.injector.injectConnection(socket);
    });
    // The handshake itself failed: the other end refused our certificate, or spoke no TLS.
    this.tls.on('tlsClientError', (err: NodeJS.ErrnoException, socket: TLSSocket) => {
      this.onRefused({
        kind: 'handshake',
        remote: remoteOf(socket),
        reason: err.code ?? 'HANDSHAKE_FAILED',
        detail: err.message,
        subject: '',
        issuer: '',
      });
    });
  }

  /** Listens on host:port (port 0 picks one); resolves with the bound port. */
  listen(address: string): Promise<number> {
    const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
    if (m === null) return Promise.reject(new Error(`${address} is not host:port`));
    const host = m[1]!;
    const port = Number(m[2]);
    return new Promise((resolve, reject) => {
      this.tls.once('error', reject);
      this.tls.listen(port, host, () => {
        this.tls.off('error', reject);
        const bound = this.tls.address();
        resolve(typeof bound === 'object' && bound !== null ? bound.port : port);
      });
    });
  }

  /** Stops accepting and drops handshakes in progress; the gRPC server closes what it was given. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    if (this.tls.listening) this.tls.close();
    for (const s of this.handshaking) s.destroy();
    this.handshaking.clear();
  }
}
