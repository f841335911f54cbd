// compileNodeOptions: defaults, and a table of rejected options where each must be named by its
// flag with the reason, all at once, and nothing half-compiled.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ValidationError } from '../../../src/base/errors.js';
import { compileNodeOptions, type NodeOptions } from '../../../src/config/node-config.js';

const base: NodeOptions = { id: 'n1', dataDir: '/tmp/d', adminTokenFile: '/tmp/admin.token' };

t.test('defaults', (t) => {
  const c = compileNodeOptions(base);
  t.equal(c.groups, 16);
  t.same(c.listen, { host: '127.0.0.1', port: 7001 });
  t.same(c.peerListen, { host: '127.0.0.1', port: 7101 });
  t.equal(c.initialCluster, undefined);
  t.equal(c.raft.electionTimeoutTicks, 10);
  t.equal(c.metricsListen, undefined, 'no metrics server unless asked');
  t.same(compileNodeOptions({ ...base, metricsListen: '127.0.0.1:9101' }).metricsListen, {
    host: '127.0.0.1',
    port: 9101,
  });
  t.ok(Object.isFrozen(c));
  t.same([...c.peerRoutes], [], 'no peer routes: peers are dialled where they advertise');
  t.equal(c.splitJobs, 1_000_000);
  t.equal(c.logTailBytesMax, 1024 * 1024, 'each group keeps 1 MiB of its log in memory');
  t.equal(compileNodeOptions({ ...base, logTailBytes: 0 }).logTailBytesMax, 0, 'or none');
  t.equal(c.splitFireRate, 0, 'no split by fire rate unless asked');
  t.equal(compileNodeOptions({ ...base, splitFireRate: 2.5 }).splitFireRate, 2.5);
  t.equal(c.delivery.originInflightMax, c.delivery.connectionsPerOrigin, 'one per connection');
  const wider = compileNodeOptions({ ...base, webhookConnections: 200 });
  t.equal(wider.delivery.originInflightMax, 200, 'following --webhook-connections');
  t.equal(compileNodeOptions({ ...base, originInflight: 500 }).delivery.originInflightMax, 500);
  t.equal(c.metricsTenants, 20, 'the 20 most active tenants named in the metrics');
  t.equal(compileNodeOptions({ ...base, metricsTenants: 0 }).metricsTenants, 0, 'or none');
  t.equal(compileNodeOptions({ ...base, metricsTenants: 1000 }).metricsTenants, 1000);
  t.end();
});

t.test('run output bounds: 64 KiB per attempt, 64 MiB in all, 0 turns capture off', (t) => {
  const c = compileNodeOptions(base);
  t.equal(c.delivery.runOutputMaxBytes, 64 * 1024);
  t.equal(c.delivery.runOutputStoreBytes, 64 * 1024 * 1024);
  const off = compileNodeOptions({ ...base, runOutputMaxBytes: 0, runOutputStoreBytes: 0 });
  t.equal(off.delivery.runOutputMaxBytes, 0, 'capture off');
  const refused = (options: NodeOptions): unknown => {
    try {
      compileNodeOptions({ ...base, ...options });
    } catch (err) {
      return err instanceof ValidationError ? err.violations : err;
    }
    return 'accepted';
  };
  t.match(refused({ runOutputMaxBytes: 1024, runOutputStoreBytes: 1024 }), [
    { field: '--run-output-store-bytes', reason: /must be an integer in \[1152, / },
  ]);
  t.match(refused({ runOutputMaxBytes: 32 * 1024 * 1024 }), [
    { field: '--run-output-max-bytes', reason: /\[0, 16777216\]/ },
  ]);
  t.match(refused({ runOutputMaxBytes: -1 }), [{ field: '--run-output-max-bytes' }]);
  t.end();
});

t.test('tickraft serve --help lists the run output flags', (t) => {
  const bin = fileURLToPath(new URL('../../../bin/tickraft', import.meta.url));
  const r = spawnSync(process.execPath, [bin, 'serve', '--help'], { encoding: 'utf8' });
  t.equal(r.status, 0);
  t.match(r.stdout, /--run-output-max-bytes <n>\s+bytes of each attempt's output/);
  t.match(r.stdout, /--run-output-store-bytes <n>\s+bytes of run output this node keeps in all/);
  t.end();
});

t.test('advertise address', (t) => {
  t.equal(compileNodeOptions(base).advertiseAddress, undefined, 'clients are told --listen');
  const c = compileNodeOptions({ ...base, listen: 'n2:7002', advertiseAddress: '127.0.0.1:7012' });
  t.same(c.listen, { host: 'n2', port: 7002 }, 'other nodes still forward to --listen');
  t.same(c.advertiseAddress, { host: '127.0.0.1', port: 7012 });
  t.end();
});

t.test('peer routes', (t) => {
  const c = compileNodeOptions({ ...base, peerRoute: 'n2=127.0.0.1:21012,n3=127.0.0.1:21013' });
  t.same(
    [...c.peerRoutes],
    [
      ['n2', '127.0.0.1:21012'],
      ['n3', '127.0.0.1:21013'],
    ],
  );
  t.end();
});

t.test('allowed webhook targets: none by default, widened by --allow-target', (t) => {
  const strict = compileNodeOptions(base).delivery.targetPolicy;
  t.same(strict.allowed, [], 'nothing widened');
  t.equal(strict.checkAddress('127.0.0.1')?.kind, 'loopback');
  // Repeated flags arrive joined by commas; a config file may give a list.
  const flags = compileNodeOptions({ ...base, allowTarget: '127.0.0.0/8,fd00::/8' });
  t.same(
    flags.delivery.targetPolicy.allowed.map((c) => `${c.address}/${c.prefix}`),
    ['127.0.0.0/8', 'fd00::/8'],
  );
  t.equal(flags.delivery.targetPolicy.checkAddress('127.0.0.1'), undefined);
  const list = compileNodeOptions({ ...base, allowTarget: ['10.0.0.0/8', '192.168.1.0/24'] });
  t.equal(list.delivery.targetPolicy.checkAddress('192.168.1.9'), undefined);
  t.equal(list.delivery.targetPolicy.checkAddress('192.168.2.9')?.kind, 'private');
  t.same(compileNodeOptions({ ...base, allowTarget: [] }).delivery.targetPolicy.allowed, []);
  t.end();
});

t.test('the debug service: not served unless --debug-listen names an address', (t) => {
  t.equal(compileNodeOptions(base).debugListen, undefined);
  t.same(compileNodeOptions({ ...base, debugListen: '127.0.0.1:7201' }).debugListen, {
    host: '127.0.0.1',
    port: 7201,
  });
  t.end();
});

const rejected: [string, NodeOptions, string, RegExp][] = [
  [
    'allow-target not a range',
    { ...base, allowTarget: '127.0.0.0/8,localhost' },
    '--allow-target',
    /'localhost' is not an IP range/,
  ],
  [
    'allow-target host bits',
    { ...base, allowTarget: ['10.0.0.1/8'] },
    '--allow-target',
    /'10\.0\.0\.1\/8' has bits set past its \/8 prefix \(did you mean 10\.0\.0\.0\/8\?\)/,
  ],
  [
    'allow-target prefix too long',
    { ...base, allowTarget: '::1/129' },
    '--allow-target',
    /'::1\/129'.*\[0, 128\]/,
  ],
  [
    'allow-target not a string',
    { ...base, allowTarget: 8 as unknown as string },
    '--allow-target',
    /must be a CIDR range/,
  ],
  ['debug without port', { ...base, debugListen: 'localhost' }, '--debug-listen', /host:port/],
  [
    'debug on the API address',
    { ...base, listen: '127.0.0.1:9', debugListen: '127.0.0.1:9' },
    '--debug-listen',
    /differ from --listen/,
  ],
  [
    'debug on the metrics address',
    { ...base, metricsListen: '127.0.0.1:8', debugListen: '127.0.0.1:8' },
    '--debug-listen',
    /differ from --metrics-listen/,
  ],
  ['missing id', { dataDir: '/d' }, '--id', /required/],
  ['bad id', { ...base, id: 'n 1' }, '--id', /must match/],
  ['missing data dir', { id: 'n1' }, '--data-dir', /required/],
  ['listen without port', { ...base, listen: 'localhost' }, '--listen', /host:port/],
  ['port too large', { ...base, peerListen: '127.0.0.1:70000' }, '--peer-listen', /65535/],
  [
    'same addresses',
    { ...base, listen: '127.0.0.1:9', peerListen: '127.0.0.1:9' },
    '--peer-listen',
    /differ/,
  ],
  [
    'metrics without port',
    { ...base, metricsListen: 'localhost' },
    '--metrics-listen',
    /host:port/,
  ],
  [
    'metrics on the API address',
    { ...base, listen: '127.0.0.1:9', metricsListen: '127.0.0.1:9' },
    '--metrics-listen',
    /differ from --listen/,
  ],
  ['advertise empty', { ...base, advertiseAddress: '' }, '--advertise-address', /host:port/],
  [
    'advertise without port',
    { ...base, advertiseAddress: 'example' },
    '--advertise-address',
    /host:port/,
  ],
  [
    'advertise a wildcard',
    { ...base, advertiseAddress: '0.0.0.0:7001' },
    '--advertise-address',
    /clients can dial/,
  ],
  [
    'advertise an IPv6 wildcard',
    { ...base, advertiseAddress: '[::]:7001' },
    '--advertise-address',
    /clients can dial/,
  ],
  ['advertise port 0', { ...base, advertiseAddress: '127.0.0.1:0' }, '--advertise-address', /0/],
  ['groups zero', { ...base, groups: 0 }, '--groups', /integer in/],
  ['groups not integer', { ...base, groups: 1.5 }, '--groups', /integer in/],
  ['tick ms', { ...base, tickMs: 0 }, '--tick-ms', /integer in/],
  [
    'heartbeat >= election',
    { ...base, heartbeatTicks: 10, electionTicks: 10 },
    '--heartbeat-ticks',
    /less than/,
  ],
  [
    'cluster entry',
    { ...base, initialCluster: 'n1=127.0.0.1:1,broken' },
    '--initial-cluster',
    /id=host:port/,
  ],
  [
    'cluster twice',
    { ...base, initialCluster: 'n1=127.0.0.1:1,n1=127.0.0.1:2' },
    '--initial-cluster',
    /twice/,
  ],
  [
    'cluster without self',
    { ...base, initialCluster: 'n2=127.0.0.1:1' },
    '--initial-cluster',
    /this node/,
  ],
  ['route entry', { ...base, peerRoute: 'n2=nowhere' }, '--peer-route', /host:port/],
  ['route twice', { ...base, peerRoute: 'n2=a:1,n2=a:2' }, '--peer-route', /twice/],
  ['log tail negative', { ...base, logTailBytes: -1 }, '--log-tail-bytes', /integer in/],
  ['log tail fraction', { ...base, logTailBytes: 0.5 }, '--log-tail-bytes', /integer in/],
  ['split jobs negative', { ...base, splitJobs: -1 }, '--split-jobs', /integer in/],
  ['split fire rate negative', { ...base, splitFireRate: -1 }, '--split-fire-rate', /fires\/s/],
  ['split fire rate NaN', { ...base, splitFireRate: NaN }, '--split-fire-rate', /fires\/s/],
  ['route to self', { ...base, peerRoute: 'n1=127.0.0.1:1' }, '--peer-route', /never dials itself/],
  ['metrics tenants negative', { ...base, metricsTenants: -1 }, '--metrics-tenants', /\[0, 1000\]/],
  ['metrics tenants too many', { ...base, metricsTenants: 1001 }, '--metrics-tenants', /1001/],
  ['metrics tenants NaN', { ...base, metricsTenants: NaN }, '--metrics-tenants', /integer in/],
];

for (const [name, opts, field, reason] of rejected) {
  t.test(`rejects ${name}`, (t) => {
    try {
      compileNodeOptions(opts);
      t.fail('accepted');
    } catch (err) {
      t.ok(err instanceof ValidationError);
      const v = (err as ValidationError).violations.find((x) => x.field === field);
      t.ok(v, `names ${field}: ${JSON.stringify((err as ValidationError).violations)}`);
      t.match(v?.reason ?? '', reason);
    }
    t.end();
  });
}

t.test('all violations at once', (t) => {
  try {
    compileNodeOptions({ groups: -1, tickMs: 0 });
    t.fail('accepted');
  } catch (err) {
    const fields = (err as ValidationError).violations.map((v) => v.field).sort();
    t.same(fields, ['--admin-token-file', '--data-dir', '--groups', '--id', '--tick-ms']);
  }
  t.end();
});

t.test('authentication: a token file, or --insecure-no-auth said out loud', (t) => {
  const fields = (o: NodeOptions): string[] => {
    try {
      compileNodeOptions(o);
      return [];
    } catch (err) {
      return (err as ValidationError).violations.map((v) => `${v.field}: ${v.reason}`);
    }
  };
  const noAuth: NodeOptions = { id: 'n1', dataDir: '/tmp/d' };
  t.match(fields(noAuth), [/^--admin-token-file: is required/], 'neither is refused');
  t.same(fields({ ...noAuth, insecureNoAuth: true }), [], '--insecure-no-auth alone is accepted');
  t.equal(compileNodeOptions({ ...noAuth, insecureNoAuth: true }).adminTokenFile, undefined);
  t.match(
    fields({ ...base, insecureNoAuth: true }),
    [/^--insecure-no-auth: cannot be given with --admin-token-file/],
    'both are refused',
  );
  t.match(fields({ ...noAuth, adminTokenFile: '' }), [/^--admin-token-file: must name a file/]);
  t.match(
    fields({ ...noAuth, insecureNoAuth: 'yes' as unknown as boolean }),
    [/^--insecure-no-auth: must be true or false/],
    'a config file value that is not a boolean is named',
  );
  t.equal(compileNodeOptions(base).adminTokenFile, '/tmp/admin.token');
  t.end();
});
