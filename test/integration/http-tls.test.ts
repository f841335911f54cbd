// The HTTP/JSON API of a node with TLS on its client API (--tls-cert, --tls-key, --tls-client-ca)
// is HTTPS with the same certificate and the same client certificate requirement: a caller with
// a certificate of the cluster's CA and a token is served (through the node's own gRPC API,
// dialled with TLS), one without a client certificate is refused at the handshake, and plaintext
// HTTP gets no answer.
import t from 'tap';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest, type RequestOptions } from 'node:https';
import { ProcCluster } from '../helpers/cluster.js';

function get(
  url: string,
  options: RequestOptions,
): Promise<{ status: number; body: string } | { error: string }> {
  const request = url.startsWith('https:') ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = request(url, { ...options, timeout: 5000 }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.end();
  });
}

t.test('HTTPS with the client API certificate, client certificates required', async (t) => {
  const cluster = await ProcCluster.create({
    nodes: 1,
    groups: 1,
    security: 'auth+tls',
    http: true,
  });
  t.teardown(() => cluster.cleanup());
  cluster.startAll();
  await cluster.waitReady(60_000);
  const n = cluster.nodes[0]!;
  const tls = cluster.clientTls!;
  const url = `https://${n.host}:${n.httpPort}/v1/admin/cluster`;
  const auth = { authorization: `Bearer ${cluster.adminToken}` };
  const ok = await get(url, { ca: tls.ca, cert: tls.cert, key: tls.key, headers: auth });
  t.match(ok, { status: 200 }, 'a client certificate of the CA and the admin token');
  t.match('body' in ok ? JSON.parse(ok.body) : {}, { nodes: [{ id: 'n1' }] });
  const anonymous = await get(url, { ca: tls.ca, cert: tls.cert, key: tls.key });
  t.match(anonymous, { status: 401 }, 'the certificate is not a token');
  const noCert = await get(url, { ca: tls.ca, headers: auth });
  t.ok('error' in noCert, `no client certificate: refused (${JSON.stringify(noCert)})`);
  const plain = await get(`http://${n.host}:${n.httpPort}/v1/admin/cluster`, { headers: auth });
  t.notOk(
    'status' in plain && plain.status === 200,
    `plaintext is not served (${JSON.stringify(plain)})`,
  );
  const doc = await get(`https://${n.host}:${n.httpPort}/v1/openapi.json`, {
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
  });
  t.match(doc, { status: 200 }, 'the document needs no token, but TLS as every path');
});
