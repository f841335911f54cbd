// Mutual TLS of the peer transport and the credentials module (src/transport/tls.ts,
// tls-listener.ts), over real sockets on 127.0.0.1 in this one process, with certificates made by
// the openssl CLI (test/helpers/certs.ts). Goal: two nodes of the cluster's CA exchange messages;
// a node whose certificate another CA signed is refused with its issuer named and never reaches
// Raft, whichever side dials; a plaintext node is refused too; the AddNode probe (probeTls)
// passes a node of the CA and names the reason for the others; a reloaded certificate is what
// the next handshake sees; a certificate without its key is an error naming the field.
import t from 'tap';
import { connect } from 'node:tls';
import { message } from '../../../src/raft/messages.js';
import {
  clientCredentials,
  probeTls,
  TlsOptionsError,
  TlsSource,
  PEER_TLS_UNVERIFIED,
} from '../../../src/transport/tls.js';
import type { GroupMessage } from '../../../src/transport/peer-transport.js';
import { TestCa } from '../../helpers/certs.js';
import { tempDir } from '../../helpers/temp-dir.js';
import { eventually, startNode } from './harness.js';

const dir = tempDir(t, 'tls-unit');
const ca = TestCa.create(dir, 'cluster-ca');
const other = TestCa.create(dir, 'other-ca');
const IPS = ['127.0.0.1'];
const source = (leaf: { certPem: Buffer; keyPem: Buffer }, trust: Buffer): TlsSource =>
  new TlsSource({ cert: leaf.certPem, key: leaf.keyPem, ca: trust });
const a1 = ca.issue('a', IPS);
const b1 = ca.issue('b', IPS);
const x1 = other.issue('x', IPS);

const hb = (from: string, to: string): GroupMessage => ({
  groupId: 1,
  message: message({ type: 'heartbeat', from, to, term: 2, commit: 1 }),
});

t.test('two nodes of the cluster CA talk; a stranger is refused on either side', async (t) => {
  const a = await startNode(t, 'a', { tls: source(a1, ca.pem) });
  const b = await startNode(t, 'b', { tls: source(b1, ca.pem) });
  // The stranger trusts both CAs, so it accepts a's server certificate and the refusal is a's.
  const x = await startNode(t, 'x', {
    tls: source(x1, Buffer.concat([other.pem, ca.pem])),
  });
  a.transport.setPeer('b', b.address);
  b.transport.setPeer('a', a.address);
  a.transport.send('b', [hb('a', 'b')]);
  b.transport.send('a', [hb('b', 'a')]);
  await eventually('frames both ways', () => a.received.length > 0 && b.received.length > 0);
  t.equal(b.received[0]?.from, 'a', 'b got a’s heartbeat over mutual TLS');
  t.same(a.refused, [], 'nothing refused between members');

  x.transport.setPeer('a', a.address);
  x.transport.send('a', [hb('x', 'a')]);
  await eventually('a refuses x', () => a.refused.length > 0);
  const r = a.refused[0]!;
  t.equal(r.kind, 'certificate');
  t.match(r.issuer, /CN=other-ca/, 'the refusal names the stranger’s issuer');
  t.match(r.subject, /CN=x/);
  t.match(r.remote, /^127\.0\.0\.1:\d+$/);
  await eventually('x notices', () => x.connectFailed.length > 0);
  t.equal(
    x.connectFailed[0]?.peer,
    'a',
    'the stranger’s stream to a failed before it was accepted',
  );

  // a dialing the stranger: a does not trust x's server certificate.
  a.transport.setPeer('x', x.address);
  a.transport.send('x', [hb('a', 'x')]);
  await eventually('a cannot connect to x', () => a.connectFailed.some((f) => f.peer === 'x'));
  t.match(
    a.connectFailed.find((f) => f.peer === 'x')?.reason ?? '',
    /certificate|UNAVAILABLE/,
    'with gRPC’s reason',
  );
  // Let any frame that might (wrongly) arrive arrive.
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.notOk(
    a.received.some((rcv) => rcv.from === 'x'),
    'no frame of the stranger ever reached a’s Raft',
  );
  t.notOk(
    x.received.some((rcv) => rcv.from === 'a'),
    'nor did a send the stranger anything it accepted',
  );
  t.equal(a.transport.peerCounters('x').receivedFrameCount, 0);
});

t.test('a plaintext node cannot talk to a TLS one', async (t) => {
  const a = await startNode(t, 'a', { tls: source(a1, ca.pem) });
  const p = await startNode(t, 'p');
  p.transport.setPeer('a', a.address);
  p.transport.send('a', [hb('p', 'a')]);
  await eventually('a refuses the plaintext handshake', () => a.refused.length > 0);
  t.equal(a.refused[0]?.kind, 'handshake', 'it spoke no TLS');
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(a.received.length, 0, 'nothing delivered');
});

t.test('probeTls: a node of the CA passes; another CA, plaintext and no one fail', async (t) => {
  const a = await startNode(t, 'a', { tls: source(a1, ca.pem) });
  const x = await startNode(t, 'x', { tls: source(x1, Buffer.concat([other.pem, ca.pem])) });
  const p = await startNode(t, 'p');
  await probeTls(a.address, source(b1, ca.pem).material, 3000);
  t.pass('a member’s peer address verifies');
  for (const [what, address] of [
    ['another CA', x.address],
    ['plaintext', p.address],
  ] as const) {
    const err = await probeTls(address, source(b1, ca.pem).material, 3000).catch((e: unknown) => e);
    t.equal((err as { code?: string }).code, PEER_TLS_UNVERIFIED, `${what}: refused`);
    t.match((err as Error).message, address, `${what}: the message names the address`);
  }
  const closed = await probeTls('127.0.0.1:1', source(b1, ca.pem).material, 3000).catch(
    (e: unknown) => e,
  );
  t.match((closed as Error).message, /ECONNREFUSED/, 'no one listening: the reason says so');
});

t.test('a reloaded certificate is what the next handshake presents', async (t) => {
  const src = source(a1, ca.pem);
  const a = await startNode(t, 'a', { tls: src });
  const subjectNow = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const s = connect({
        host: '127.0.0.1',
        port: a.port,
        ca: ca.pem,
        cert: b1.certPem,
        key: b1.keyPem,
        ALPNProtocols: ['h2'],
      });
      s.once('secureConnect', () => {
        resolve(String(s.getPeerCertificate().subject.CN));
        s.destroy();
      });
      s.once('error', reject);
    });
  t.equal(await subjectNow(), 'a');
  const renewed = ca.issue('a-renewed', IPS);
  src.update({ cert: renewed.certPem, key: renewed.keyPem, ca: ca.pem });
  t.equal(await subjectNow(), 'a-renewed', 'the listener serves the new certificate');
});

t.test('a certificate without its key (or the reverse) names the field', (t) => {
  t.throws(() => clientCredentials({ ca: ca.pem, cert: a1.certPem }), TlsOptionsError);
  t.throws(
    () => clientCredentials({ ca: ca.pem, key: a1.keyPem }),
    /tls\.cert: is required with a private key/,
  );
  t.throws(() => new TlsSource({ cert: a1.certPem }), /key: is required with a certificate/);
  t.ok(clientCredentials(undefined), 'no tls: plaintext credentials');
  t.end();
});
