/**
 * Certificates for the TLS tests, made with the openssl command-line tool as an operator would
 * (the commands of docs/OPERATIONS.md, TLS): a CA, and leaf certificates it signs, each valid for
 * both TLS server and client use and naming its loopback IP addresses. Installs openssl first
 * (scripts/ensure-package.sh, as `npm test` does first) when the machine lacks it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ENSURE = fileURLToPath(new URL('../../scripts/ensure-package.sh', import.meta.url));

function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Makes sure `openssl` runs; throws naming what is missing otherwise. */
export function ensureOpenssl(): void {
  if (hasOpenssl()) return;
  execFileSync('sh', [ENSURE, 'openssl', 'command -v openssl', 'the TLS tests'], {
    stdio: 'inherit',
  });
  if (!hasOpenssl())
    throw new Error('the TLS tests need the openssl command (apt-get install openssl)');
}

function openssl(args: readonly string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A certificate and its key, as file paths and as PEM buffers. */
export interface Issued {
  readonly cert: string;
  readonly key: string;
  readonly certPem: Buffer;
  readonly keyPem: Buffer;
}

export class TestCa {
  readonly cert: string;
  readonly key: string;

  private constructor(
    readonly dir: string,
    readonly name: string,
  ) {
    this.cert = join(dir, `${name}.pem`);
    this.key = join(dir, `${name}.key`);
  }

  get pem(): Buffer {
    return readFileSync(this.cert);
  }

  /** A self-signed CA (P-256, valid two days) in `dir`, as `<name>.pem` and `<name>.key`. */
  static create(dir: string, name: string): TestCa {
    ensureOpenssl();
    const ca = new TestCa(dir, name);
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        ca.key,
        '-out',
        ca.cert,
        '-days',
        '2',
        '-subj',
        `/CN=${name}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
    return ca;
  }

  /**
   * A leaf certificate signed by this CA for `name` (its CN), with subjectAltName IP entries for
   * `ips` (and DNS:localhost), usable as a TLS server and a TLS client certificate.
   */
  issue(name: string, ips: readonly string[]): Issued {
    const base = join(this.dir, `${this.name}-${name}`);
    const ext = `${base}.ext`;
    writeFileSync(
      ext,
      [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=serverAuth,clientAuth',
        `subjectAltName=${['DNS:localhost', ...ips.map((ip) => `IP:${ip}`)].join(',')}`,
        '',
      ].join('\n'),
    );
    const key = `${base}.key`;
    const csr = `${base}.csr`;
    const cert = `${base}.pem`;
    openssl(
      [
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        `/CN=${name}`,
      ],
      this.dir,
    );
    openssl(
      [
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        this.cert,
        '-CAkey',
        this.key,
        '-set_serial',
        String(Math.floor(Math.random() * 2 ** 48)),
        '-days',
        '2',
        '-extfile',
        ext,
        '-out',
        cert,
      ],
      this.dir,
    );
    return { cert, key, certPem: readFileSync(cert), keyPem: readFileSync(key) };
  }
}
