// The TLS options of `tickraft serve`: which flag combinations compileNodeOptions refuses (each
// missing partner named), what loadNodeTls refuses in the files (unreadable, not PEM, a key of
// another certificate, the node's own certificate not signed by the CA it checks others with,
// an expired certificate), what it builds from good files (which CA forwarding trusts), that a
// reload with a bad file changes nothing, and which listeners count as plaintext on loopback.
// Certificates are made with the openssl CLI (test/helpers/certs.ts).
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ValidationError } from '../../../src/base/errors.js';
import { compileNodeOptions, type NodeOptions } from '../../../src/config/node-config.js';
import {
  isLoopbackHost,
  loadNodeTls,
  plaintextListeners,
  reloadNodeTls,
} from '../../../src/config/tls-files.js';
import { TestCa } from '../../helpers/certs.js';
import { tempDir } from '../../helpers/temp-dir.js';

const base: NodeOptions = { id: 'n1', dataDir: '/tmp/d', insecureNoAuth: true };

/** The violations compileNodeOptions (or `fn`) reports, as "flag: reason" lines. */
function refused(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return err.violations.map((v) => `${v.field}: ${v.reason}`);
    throw err;
  }
  return [];
}

t.test('flag combinations', (t) => {
  const c = compileNodeOptions(base);
  t.equal(c.apiTls, undefined, 'plaintext by default');
  t.equal(c.peerTls, undefined);
  for (const [given, missing] of [
    [{ peerTlsCert: 'c' }, ['--peer-tls-key', '--peer-tls-ca']],
    [{ peerTlsKey: 'k' }, ['--peer-tls-cert', '--peer-tls-ca']],
    [{ peerTlsCert: 'c', peerTlsKey: 'k' }, ['--peer-tls-ca']],
    [{ peerTlsCa: 'a' }, ['--peer-tls-cert', '--peer-tls-key']],
  ] as const) {
    const lines = refused(() => compileNodeOptions({ ...base, ...given }));
    t.same(
      lines.map((l) => l.split(':')[0]),
      missing,
      `${Object.keys(given).join('+')}: names ${missing.join(', ')}`,
    );
    t.match(lines[0], /is required with --peer-tls/);
  }
  t.match(
    refused(() => compileNodeOptions({ ...base, tlsKey: 'k' })),
    [/^--tls-cert: is required with --tls-key/],
  );
  t.match(
    refused(() => compileNodeOptions({ ...base, tlsCert: 'c' })),
    [/^--tls-key: is required with --tls-cert/],
  );
  t.match(
    refused(() => compileNodeOptions({ ...base, tlsClientCa: 'a' })),
    [/^--tls-client-ca: needs --tls-cert and --tls-key/],
  );
  t.match(
    refused(() => compileNodeOptions({ ...base, tlsCa: 'a' })),
    [/^--tls-ca: needs --tls-cert and --tls-key/],
  );
  t.match(
    refused(() => compileNodeOptions({ ...base, tlsCert: '', tlsKey: 'k' })),
    [/^--tls-cert: must name a PEM file/],
  );
  const full = compileNodeOptions({
    ...base,
    tlsCert: 'c',
    tlsKey: 'k',
    tlsClientCa: 'cc',
    peerTlsCert: 'pc',
    peerTlsKey: 'pk',
    peerTlsCa: 'pa',
  });
  t.same(full.apiTls, { certFile: 'c', keyFile: 'k', clientCaFile: 'cc', caFile: undefined });
  t.same(full.peerTls, { certFile: 'pc', keyFile: 'pk', caFile: 'pa' });
  t.end();
});

t.test('files', (t) => {
  const dir = tempDir(t, 'tls-files');
  const ca = TestCa.create(dir, 'ca');
  const ca2 = TestCa.create(dir, 'ca2');
  const other = TestCa.create(dir, 'other');
  const n1 = ca.issue('n1', ['127.0.0.1']);
  const n2 = ca.issue('n2', ['127.0.0.1']);
  const byCa2 = ca2.issue('n3', ['127.0.0.1']);
  const stranger = other.issue('x', ['127.0.0.1']);
  const junk = join(dir, 'junk.pem');
  writeFileSync(junk, 'not a certificate\n');
  const bundle = join(dir, 'bundle.pem');
  writeFileSync(bundle, Buffer.concat([ca.pem, ca2.pem]));
  const cfg = (o: NodeOptions) => compileNodeOptions({ ...base, ...o });
  const api = { tlsCert: n1.cert, tlsKey: n1.key };
  const peer = { peerTlsCert: n1.cert, peerTlsKey: n1.key, peerTlsCa: ca.cert };

  t.test('refused, each naming its flag', (t) => {
    t.match(
      refused(() => loadNodeTls(cfg({ ...api, tlsCert: join(dir, 'nope.pem') }))),
      [/^--tls-cert: cannot read .*nope\.pem: ENOENT/],
    );
    t.match(
      refused(() => loadNodeTls(cfg({ ...api, tlsCert: junk }))),
      [/^--tls-cert: .*junk\.pem holds no PEM certificate/],
    );
    t.match(
      refused(() => loadNodeTls(cfg({ ...api, tlsKey: junk }))),
      [/^--tls-key: .*junk\.pem is not a PEM private key/],
    );
    t.match(
      refused(() => loadNodeTls(cfg({ ...api, tlsKey: n2.key }))),
      [/^--tls-key: does not belong to the certificate of --tls-cert \(CN=n1\)/],
    );
    t.match(
      refused(() => loadNodeTls(cfg({ ...api, tlsClientCa: other.cert }))),
      [/^--tls-cert: CN=n1 \(issued by CN=ca\) is not signed by a CA of --tls-client-ca/],
    );
    t.match(
      refused(() => loadNodeTls(cfg({ ...api, tlsCa: other.cert }))),
      [/^--tls-cert: .* is not signed by a CA of --tls-ca/],
    );
    t.match(
      refused(() =>
        loadNodeTls(cfg({ ...peer, peerTlsCert: stranger.cert, peerTlsKey: stranger.key })),
      ),
      [/^--peer-tls-cert: CN=x \(issued by CN=other\) is not signed by a CA of --peer-tls-ca/],
    );
    t.match(
      refused(() => loadNodeTls(cfg({ ...peer, peerTlsCa: junk }))),
      [/^--peer-tls-ca: .* holds no PEM certificate/],
    );
    const inThreeDays = Date.now() + 3 * 86_400_000;
    t.match(
      refused(() => loadNodeTls(cfg(api), inThreeDays)),
      [/^--tls-cert: certificate 1 of .* \(CN=n1\) expired on /],
    );
    t.equal(
      refused(() => loadNodeTls(cfg({ ...api, tlsKey: n2.key, ...peer, peerTlsCa: junk }))).length,
      2,
      'every problem at once',
    );
    t.end();
  });

  t.test('built', (t) => {
    const { tls, summary } = loadNodeTls(cfg({ ...api, tlsClientCa: ca.cert, ...peer }));
    t.equal(tls.api?.requireClientCert, true);
    t.same(tls.api?.server.material.ca, ca.pem, 'the server checks clients against the client CA');
    t.same(tls.api?.dial.material.ca, ca.pem, 'forwarding trusts --tls-client-ca by default');
    t.same(tls.peer?.material.ca, ca.pem);
    t.match(summary, { api: /^CN=n1, valid until /, peer: /^CN=n1/ });
    const plainTls = loadNodeTls(cfg(api)).tls;
    t.equal(plainTls.api?.requireClientCert, false);
    t.equal(plainTls.api?.dial.material.ca, undefined, 'no CA given: the system roots');
    t.equal(plainTls.peer, undefined);
    const withCa = loadNodeTls(cfg({ ...api, tlsCa: bundle, tlsClientCa: ca.cert })).tls;
    t.same(withCa.api?.dial.material.ca?.toString(), Buffer.concat([ca.pem, ca2.pem]).toString());
    t.ok(
      loadNodeTls(
        cfg({ ...peer, peerTlsCert: byCa2.cert, peerTlsKey: byCa2.key, peerTlsCa: bundle }),
      ).tls.peer,
      'a certificate of the second CA of a bundle (a CA rotation) passes',
    );
    t.end();
  });

  t.test('reload', (t) => {
    const config = cfg({ ...api, ...peer });
    const { tls } = loadNodeTls(config);
    const seen: string[] = [];
    tls.peer?.onChange(() => seen.push('peer'));
    // The files change on disk: a bad key first (refused, nothing changes), then a good pair.
    const certFile = join(dir, 'live.pem');
    const keyFile = join(dir, 'live.key');
    writeFileSync(certFile, n1.certPem);
    writeFileSync(keyFile, n2.keyPem);
    const live = compileNodeOptions({
      ...base,
      ...peer,
      peerTlsCert: certFile,
      peerTlsKey: keyFile,
    });
    t.match(
      refused(() => reloadNodeTls(live, tls)),
      [/^--peer-tls-key: does not belong/],
    );
    t.same(seen, [], 'a refused reload touches nothing');
    t.same(tls.peer?.material.cert, n1.certPem);
    writeFileSync(certFile, n2.certPem);
    t.match(reloadNodeTls(live, tls), { peer: /^CN=n2/ });
    t.same(seen, ['peer'], 'listeners are told');
    t.same(tls.peer?.material.cert, n2.certPem, 'the new certificate is current');
    t.end();
  });
  t.end();
});

t.test('plaintext listeners and loopback', (t) => {
  for (const h of ['127.0.0.1', '127.4.5.6', 'localhost', '[::1]', '::1'])
    t.ok(isLoopbackHost(h), `${h} is loopback`);
  for (const h of ['0.0.0.0', '10.0.0.1', '[::]', 'n1', '128.0.0.1'])
    t.notOk(isLoopbackHost(h), `${h} is not`);
  const c = compileNodeOptions({
    ...base,
    listen: '0.0.0.0:7001',
    metricsListen: '127.0.0.1:9101',
  });
  t.same(
    plaintextListeners(c),
    [
      { flag: '--listen', address: '0.0.0.0:7001', loopback: false },
      { flag: '--peer-listen', address: '127.0.0.1:7101', loopback: true },
      { flag: '--metrics-listen', address: '127.0.0.1:9101', loopback: true },
    ],
    'all three, and which are exposed',
  );
  const tlsOn = compileNodeOptions({
    ...base,
    tlsCert: 'c',
    tlsKey: 'k',
    metricsListen: '127.0.0.1:9101',
  });
  t.same(
    plaintextListeners(tlsOn).map((l) => l.flag),
    ['--peer-listen'],
    '--tls-cert covers the API and metrics',
  );
  t.end();
});
