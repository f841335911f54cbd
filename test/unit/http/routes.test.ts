// The route table covers the public API: every RPC of the public services has exactly one path
// (WorkerService.Work, a bidirectional stream, has none and says why), every path names an RPC
// and fields that exist, and the matcher reads paths as docs/HTTP.md says (fire ids
// percent-encoded, custom verbs, 404 and 405).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseApiProto } from '../../../src/api/client-proto.js';
import { loadApiServices } from '../../../src/api/proto.js';
import { PUBLIC_SERVICES } from '../../../src/api/proto-options.js';
import { buildRequest } from '../../../src/http/json-request.js';
import { compileTemplate, RouteTable } from '../../../src/http/path-template.js';
import { OPENAPI_PATH, ROUTES, UNROUTED_RPCS } from '../../../src/http/routes.js';

t.test('every RPC of the public services has a path, and every path an RPC', (t) => {
  const services = loadApiServices();
  const rpcs: string[] = [];
  for (const service of PUBLIC_SERVICES)
    for (const method of Object.keys(services[service].service)) rpcs.push(`${service}.${method}`);
  t.ok(rpcs.length >= 40, `the proto has the public RPCs (${rpcs.length})`);
  const routed = ROUTES.map((r) => `${r.service}.${r.rpc}`);
  for (const rpc of rpcs) {
    const n = routed.filter((r) => r === rpc).length;
    if (rpc in UNROUTED_RPCS) t.equal(n, 0, `${rpc} has no path: ${UNROUTED_RPCS[rpc]}`);
    else t.equal(n, 1, `${rpc} has exactly one path`);
  }
  for (const r of routed) t.ok(rpcs.includes(r), `${r} is an RPC of a public service`);
  t.same(Object.keys(UNROUTED_RPCS), ['WorkerService.Work'], 'only the bidirectional stream');
  t.end();
});

t.test('each route is well formed', (t) => {
  const root = parseApiProto();
  root.resolveAll();
  const seen = new Set<string>();
  for (const route of ROUTES) {
    const key = `${route.method} ${route.path}`;
    t.notOk(seen.has(key), `${key} is in the table once`);
    seen.add(key);
    const method = root.lookupService(`tickraft.v1.${route.service}`).methods[route.rpc]!;
    const vars = compileTemplate(route.path).variables;
    t.same([...vars].sort(), Object.keys(route.bind).sort(), `${key}: its variables are bound`);
    t.equal(route.rest, route.method === 'GET' || route.method === 'DELETE' ? 'query' : 'body');
    if (method.responseStream) t.equal(route.method, 'GET', `${key}: a stream is read with GET`);
    t.notOk(method.requestStream, `${key}: no client stream`);
    // Binding a value of the right type sets every bound field (throws on a field that is not).
    const params = new Map(vars.map((v) => [v, v === 'group_id' ? '1' : 'x']));
    const req = buildRequest(route, method.resolvedRequestType!, {
      params,
      query: new URLSearchParams(),
      body: route.rpc === 'CreateJobs' ? { jobs: [{ jobId: 'a' }] } : undefined,
    });
    t.ok(Object.keys(req).length > 0 || vars.length === 0, `${key}: the path sets its fields`);
  }
  t.end();
});

t.test('matching paths: fire ids, custom verbs, 404 and 405', (t) => {
  const table = new RouteTable(ROUTES);
  const fire = encodeURIComponent('acme/nightly:1751333400000');
  t.equal(fire, 'acme%2Fnightly%3A1751333400000');
  const get = table.match('GET', `/v1/tenants/acme/runs/${fire}`);
  t.equal(get.kind, 'found');
  if (get.kind === 'found') {
    t.equal(get.route.rpc, 'GetRun');
    t.equal(get.params.get('fire_id'), 'acme/nightly:1751333400000');
  }
  // An unencoded ':' in a variable is kept where no verb is expected.
  const loose = table.match('GET', '/v1/tenants/acme/runs/acme%2Fnightly:1751333400000');
  t.equal(loose.kind === 'found' && loose.params.get('fire_id'), 'acme/nightly:1751333400000');
  const replay = table.match('POST', `/v1/tenants/acme/runs/${fire}:replay`);
  t.equal(replay.kind === 'found' && replay.route.rpc, 'ReplayRun');
  t.equal(replay.kind === 'found' && replay.params.get('fire_id'), 'acme/nightly:1751333400000');
  // An encoded colon is never a verb.
  const encodedVerb = table.match('POST', `/v1/tenants/acme/runs/${fire}%3Areplay`);
  t.equal(encodedVerb.kind, 'method-not-allowed', 'GET reads that run; POST is no verb of it');
  t.same(
    table.match('GET', '/v1/tenants/acme/runs/acme/nightly:1'),
    { kind: 'not-found' },
    "a raw '/' is another segment",
  );
  const pause = table.match('DELETE', '/v1/tenants/acme/jobs/j1:pause');
  t.same(pause, { kind: 'method-not-allowed', allow: ['POST'] }, 'the verb reading wins: 405');
  t.same(table.match('PATCH', '/v1/tenants/acme/jobs/j1'), {
    kind: 'method-not-allowed',
    allow: ['GET', 'PUT', 'DELETE'],
  });
  t.equal(table.match('GET', '/v1/tenants/acme/jobs/j1/runs:watch').kind, 'found');
  t.equal(table.match('GET', '/v1/tenants/acme/jobs/j1/runs').kind, 'found');
  t.equal(table.match('POST', '/v1/tenants/acme/jobs:batchCreate').kind, 'found');
  for (const bad of [
    '/v1/tenants/',
    '/v1//tenants',
    '/v2/tenants',
    '/v1/tenants/acme/jobs/',
    'v1/tenants',
  ])
    t.same(table.match('GET', bad), { kind: 'not-found' }, `${bad}: not found`);
  t.throws(() => table.match('GET', '/v1/tenants/acme/jobs/%E0%A4%A'), {
    code: 'HTTP_PATH_INVALID',
  });
  t.end();
});

t.test("docs/HTTP.md's path table is the route table", (t) => {
  const text = readFileSync(
    fileURLToPath(new URL('../../../docs/HTTP.md', import.meta.url)),
    'utf8',
  );
  const rows = [
    ...text.matchAll(
      /^\| `(GET|POST|PUT|PATCH|DELETE)` +\| `([^`]+)` +\| ([^|]+?) +\| ([^|]+?) +\|$/gm,
    ),
  ].map((m) => `${m[1]} ${m[2]} ${m[3]} ${m[4]}`);
  t.same(rows, [
    ...ROUTES.map((r) => `${r.method} ${r.path} \`${r.service}.${r.rpc}\` ${r.rest}`),
    `GET ${OPENAPI_PATH} (this API's OpenAPI document) none; no token`,
  ]);
  t.end();
});
