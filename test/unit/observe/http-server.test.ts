// The ops HTTP server: /readyz answers 503 with the reason until the node is ready, then 200;
// /healthz is 200 throughout; /metrics passes the registry's content type; other methods 405.
import t from 'tap';
import { OpsHttpServer, type Readiness } from '../../../src/observe/http-server.js';

t.test('readyz follows readiness, healthz is always up', async (t) => {
  let readiness: Readiness = { ready: false, reason: 'meta group not initialized' };
  const server = new OpsHttpServer({
    render: () => Promise.resolve({ contentType: 'text/plain; version=0.0.4', body: 'x 1\n' }),
    readiness: () => readiness,
  });
  const port = await server.start('127.0.0.1', 0);
  t.teardown(() => server.close());
  const get = async (path: string, method = 'GET') => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
    return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
  };
  t.equal((await get('/healthz')).status, 200);
  const notReady = await get('/readyz');
  t.equal(notReady.status, 503);
  t.match(notReady.body, /meta group not initialized/);
  readiness = { ready: true };
  t.equal((await get('/readyz')).status, 200);
  const m = await get('/metrics');
  t.equal(m.body, 'x 1\n');
  t.match(m.type, /version=0.0.4/);
  t.equal((await get('/metrics', 'POST')).status, 405);
});

t.test('a taken port is a typed error', async (t) => {
  const a = new OpsHttpServer({
    render: () => Promise.resolve({ contentType: 'text/plain', body: '' }),
    readiness: () => ({ ready: true }),
  });
  const port = await a.start('127.0.0.1', 0);
  t.teardown(() => a.close());
  const b = new OpsHttpServer({
    render: () => Promise.resolve({ contentType: 'text/plain', body: '' }),
    readiness: () => ({ ready: true }),
  });
  await t.rejects(b.start('127.0.0.1', port), { code: 'OBSERVE_LISTEN_FAILED' });
});
