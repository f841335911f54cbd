// --http-listen: off unless given, an address of its own, named among the plaintext listeners
// when the node has no TLS, and listed by `tickraft serve --help`.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ValidationError } from '../../../src/base/errors.js';
import { compileNodeOptions, type NodeOptions } from '../../../src/config/node-config.js';
import { plaintextListeners } from '../../../src/config/tls-files.js';
import { loopbackAddress } from '../../../src/http/grpc-loopback.js';

const base = { id: 'n1', dataDir: '/tmp/x', adminTokenFile: '/tmp/t' };

function violations(options: NodeOptions): { field: string; reason: string }[] {
  try {
    compileNodeOptions(options);
  } catch (err) {
    if (err instanceof ValidationError) return [...err.violations];
    throw err;
  }
  return [];
}

t.test('the option', (t) => {
  t.equal(compileNodeOptions(base).httpListen, undefined, 'no HTTP API unless asked');
  t.same(compileNodeOptions({ ...base, httpListen: '127.0.0.1:8001' }).httpListen, {
    host: '127.0.0.1',
    port: 8001,
  });
  for (const [other, flag] of [
    [{ listen: '127.0.0.1:8001' }, '--listen'],
    [{ metricsListen: '127.0.0.1:8001' }, '--metrics-listen'],
    [{ debugListen: '127.0.0.1:8001' }, '--debug-listen'],
  ] as const)
    t.same(violations({ ...base, ...other, httpListen: '127.0.0.1:8001' }), [
      { field: '--http-listen', reason: `must differ from ${flag}` },
    ]);
  t.same(
    violations({ ...base, httpListen: 'localhost' }).map((v) => v.field),
    ['--http-listen'],
  );
  const plain = plaintextListeners(compileNodeOptions({ ...base, httpListen: '0.0.0.0:8001' }));
  t.same(
    plain.find((l) => l.flag === '--http-listen'),
    {
      flag: '--http-listen',
      address: '0.0.0.0:8001',
      loopback: false,
    },
  );
  t.end();
});

t.test('the node dials its own API on loopback when it listens on a wildcard', (t) => {
  t.equal(loopbackAddress('0.0.0.0', 7001), '127.0.0.1:7001');
  t.equal(loopbackAddress('[::]', 7001), '[::1]:7001');
  t.equal(loopbackAddress('10.0.0.5', 7001), '10.0.0.5:7001');
  t.end();
});

t.test('tickraft serve --help lists --http-listen', (t) => {
  const bin = fileURLToPath(new URL('../../../bin/tickraft', import.meta.url));
  const r = spawnSync(process.execPath, [bin, 'serve', '--help'], { encoding: 'utf8' });
  t.equal(r.status, 0);
  t.match(r.stdout, /--http-listen <host:port>\s+serve the HTTP\/JSON API/);
  t.end();
});
