/**
 * The TLS files of `tickraft serve` (--tls-*, --peer-tls-*): read, checked, and turned into the
 * TlsSources the listeners and dialers are built from (src/transport/tls.ts). Read at start and
 * again on SIGHUP (loadNodeTls / reloadNodeTls). Every problem names the flag and the reason,
 * all of them at once, and the node does not start (exit 2), or keeps its current material on a
 * reload:
 *
 * - a file that cannot be read, or holds no PEM certificate / private key;
 * - a certificate that has expired or is not valid yet;
 * - a key that does not belong to its certificate;
 * - this node's own certificate not signed by the CA it checks the other nodes with: the other
 *   nodes' certificates must be signed by that CA, and so must this one, so this is almost
 *   certainly the wrong CA file (or the wrong certificate), found now rather than at the first
 *   refused handshake.
 *
 * Also here: which listeners serve plaintext, for the start-up warning.
 */
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { TlsSource, type TlsMaterial } from '../transport/tls.js';
import { formatHostPort, type CompiledNodeConfig, type HostPort } from './node-config.js';

/** The TLS a node runs with; undefined parts are plaintext. */
export interface NodeTls {
  readonly api:
    | {
        /** The client API's (and metrics') certificate and key, and the client CA if required. */
        readonly server: TlsSource;
        /** Clients must present a certificate signed by --tls-client-ca. */
        readonly requireClientCert: boolean;
        /** What this node dials other nodes' client APIs with (forwarding, --join). */
        readonly dial: TlsSource;
      }
    | undefined;
  /** Mutual TLS between nodes: this node's certificate and key, and the cluster's CA. */
  readonly peer: TlsSource | undefined;
}

interface Materials {
  readonly api: { server: TlsMaterial; dial: TlsMaterial; requireClientCert: boolean } | undefined;
  readonly peer: TlsMaterial | undefined;
  /** One line per certificate: its subject and expiry, for the log. */
  readonly summary: Record<string, string>;
}

const CERT_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

class Reader {
  readonly violations: FieldViolation[] = [];
  constructor(private readonly nowMs: number) {}

  private bad(flag: string, reason: string): void {
    this.violations.push({ field: flag, reason });
  }

  private read(flag: string, file: string): Buffer | undefined {
    try {
      return readFileSync(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      this.bad(flag, `cannot read ${file}: ${code ?? (err as Error).message}`);
      return undefined;
    }
  }

  /**
   * The certificates of a PEM file, in order; at least one. Those of this node (`own`) must be
   * valid now; a CA bundle may hold an expired CA (one being rotated out), which simply never
   * verifies anything.
   */
  certs(
    flag: string,
    file: string,
    own: boolean,
  ): { pem: Buffer; certs: X509Certificate[] } | undefined {
    const pem = this.read(flag, file);
    if (pem === undefined) return undefined;
    const blocks = pem.toString('utf8').match(CERT_BLOCK) ?? [];
    if (blocks.length === 0) {
      this.bad(flag, `${file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
      return undefined;
    }
    const certs: X509Certificate[] = [];
    for (const [i, block] of blocks.entries()) {
      let cert: X509Certificate;
      try {
        cert = new X509Certificate(block);
      } catch (err) {
        this.bad(flag, `certificate ${i + 1} of ${file} does not parse: ${(err as Error).message}`);
        return undefined;
      }
      if (own && Date.parse(cert.validTo) < this.nowMs) {
        this.bad(
          flag,
          `certificate ${i + 1} of ${file} (${subjectOf(cert)}) expired on ${cert.validTo}`,
        );
        return undefined;
      }
      if (own && Date.parse(cert.validFrom) > this.nowMs) {
        this.bad(
          flag,
          `certificate ${i + 1} of ${file} (${subjectOf(cert)}) is not valid before ${cert.validFrom}`,
        );
        return undefined;
      }
      certs.push(cert);
    }
    return { pem, certs };
  }

  key(flag: string, file: string): { pem: Buffer; key: KeyObject } | undefined {
    const pem = this.read(flag, file);
    if (pem === undefined) return undefined;
    try {
      return { pem, key: createPrivateKey(pem) };
    } catch (err) {
      this.bad(flag, `${file} is not a PEM private key (unencrypted): ${(err as Error).message}`);
      return undefined;
    }
  }

  /** `cert` and `key` belong together. */
  pair(keyFlag: string, certFlag: string, leaf: X509Certificate, key: KeyObject): void {
    if (!leaf.checkPrivateKey(key))
      this.bad(keyFlag, `does not belong to the certificate of ${certFlag} (${subjectOf(leaf)})`);
  }

  /** This node's own certificate chains to a CA of `cas`. */
  signedBy(
    certFlag: string,
    chain: readonly X509Certificate[],
    caFlag: string,
    cas: readonly X509Certificate[],
    why: string,
  ): void {
    if (!chainsTo(chain, cas))
      this.bad(
        certFlag,
        `${subjectOf(chain[0]!)} (issued by ${chain[0]!.issuer.replace(/\n/g, ',')}) is not signed by a CA of ${caFlag}: ${why}`,
      );
  }
}

function subjectOf(cert: X509Certificate): string {
  return cert.subject.replace(/\n/g, ',');
}

/** Whether `chain` (leaf first, then intermediates) leads to a certificate of `cas`. */
function chainsTo(chain: readonly X509Certificate[], cas: readonly X509Certificate[]): boolean {
  let cur = chain[0];
  for (let depth = 0; cur !== undefined && depth < 10; depth++) {
    const at = cur;
    if (cas.some((ca) => at.checkIssued(ca) && at.verify(ca.publicKey))) return true;
    cur = chain.find((c) => c !== at && at.checkIssued(c) && at.verify(c.publicKey));
  }
  return false;
}

function readAll(cfg: CompiledNodeConfig, nowMs: number): Materials {
  const r = new Reader(nowMs);
  const summary: Record<string, string> = {};
  let api: Materials['api'];
  if (cfg.apiTls !== undefined) {
    const f = cfg.apiTls;
    const cert = r.certs('--tls-cert', f.certFile, true);
    const key = r.key('--tls-key', f.keyFile);
    const clientCa =
      f.clientCaFile === undefined ? undefined : r.certs('--tls-client-ca', f.clientCaFile, false);
    const ca = f.caFile === undefined ? undefined : r.certs('--tls-ca', f.caFile, false);
    if (cert && key) r.pair('--tls-key', '--tls-cert', cert.certs[0]!, key.key);
    if (cert && clientCa)
      r.signedBy(
        '--tls-cert',
        cert.certs,
        '--tls-client-ca',
        clientCa.certs,
        'this node presents it as its client certificate when it forwards a call to another node, which checks it against its --tls-client-ca',
      );
    if (cert && ca)
      r.signedBy(
        '--tls-cert',
        cert.certs,
        '--tls-ca',
        ca.certs,
        "this node checks the other nodes' API certificates against --tls-ca, and they are signed like its own",
      );
    if (cert && key) {
      summary['api'] = describe(cert.certs[0]!);
      const dialCa = ca?.pem ?? clientCa?.pem;
      api = {
        server: { cert: cert.pem, key: key.pem, ...(clientCa ? { ca: clientCa.pem } : {}) },
        dial: { cert: cert.pem, key: key.pem, ...(dialCa ? { ca: dialCa } : {}) },
        requireClientCert: f.clientCaFile !== undefined,
      };
    }
  }
  let peer: TlsMaterial | undefined;
  if (cfg.peerTls !== undefined) {
    const f = cfg.peerTls;
    const cert = r.certs('--peer-tls-cert', f.certFile, true);
    const key = r.key('--peer-tls-key', f.keyFile);
    const ca = r.certs('--peer-tls-ca', f.caFile, false);
    if (cert && key) r.pair('--peer-tls-key', '--peer-tls-cert', cert.certs[0]!, key.key);
    if (cert && ca)
      r.signedBy(
        '--peer-tls-cert',
        cert.certs,
        '--peer-tls-ca',
        ca.certs,
        "the other nodes accept only peer certificates signed by the cluster's CA",
      );
    if (cert && key && ca) {
      summary['peer'] = describe(cert.certs[0]!);
      peer = { cert: cert.pem, key: key.pem, ca: ca.pem };
    }
  }
  if (r.violations.length > 0) throw new ValidationError('CONFIG_INVALID', r.violations);
  return { api, peer, summary };
}

function describe(cert: X509Certificate): string {
  return `${subjectOf(cert)}, valid until ${new Date(cert.validTo).toISOString()}`;
}

/** Reads and checks the node's TLS files; throws a ValidationError naming each bad flag. */
export function loadNodeTls(
  cfg: CompiledNodeConfig,
  nowMs = Date.now(),
): { tls: NodeTls; summary: Record<string, string> } {
  const m = readAll(cfg, nowMs);
  return {
    tls: {
      api: m.api && {
        server: new TlsSource(m.api.server),
        requireClientCert: m.api.requireClientCert,
        dial: new TlsSource(m.api.dial),
      },
      peer: m.peer && new TlsSource(m.peer),
    },
    summary: m.summary,
  };
}

/**
 * Reads the files again (SIGHUP) and, only if every one passes the start-up checks, hands the
 * new material to `tls`'s sources; otherwise throws (the ValidationError names the flags) and
 * changes nothing.
 */
export function reloadNodeTls(
  cfg: CompiledNodeConfig,
  tls: NodeTls,
  nowMs = Date.now(),
): Record<string, string> {
  const m = readAll(cfg, nowMs);
  if (tls.api && m.api) {
    tls.api.server.update(m.api.server);
    tls.api.dial.update(m.api.dial);
  }
  if (tls.peer && m.peer) tls.peer.update(m.peer);
  return m.summary;
}

/** A listener the node runs without TLS, for the start-up warning. */
export interface PlaintextListener {
  readonly flag: string;
  readonly address: string;
  /** Bound to a loopback address only (127.0.0.0/8, ::1, localhost). */
  readonly loopback: boolean;
}

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** The listeners of `cfg` that serve plaintext. */
export function plaintextListeners(cfg: CompiledNodeConfig): PlaintextListener[] {
  const out: PlaintextListener[] = [];
  const add = (flag: string, hp: HostPort): void => {
    out.push({ flag, address: formatHostPort(hp), loopback: isLoopbackHost(hp.host) });
  };
  if (cfg.apiTls === undefined) add('--listen', cfg.listen);
  if (cfg.peerTls === undefined) add('--peer-listen', cfg.peerListen);
  if (cfg.apiTls === undefined && cfg.metricsListen !== undefined)
    add('--metrics-listen', cfg.metricsListen);
  if (cfg.apiTls === undefined && cfg.httpListen !== undefined)
    add('--http-listen', cfg.httpListen);
  return out;
}
