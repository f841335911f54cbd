// The HTTP/JSON API (--http-listen, docs/HTTP.md) of a real 3-node cluster, calls spread over the
// nodes so that forwarding to group leaders is part of it:
// - a session as a newcomer would run it with curl (Node's fetch here): a tenant, a writer token,
//   a job, a trigger, its run, the runs list, the DLQ, and a watch of the job's runs as NDJSON;
// - the errors: HTTP status, the JSON body, Allow, WWW-Authenticate;
// - every path refuses a call without a token (401), and another tenant's writer exactly as the
//   gRPC API refuses the same call with the same token;
// - every path and method of the OpenAPI document, called with the admin token and a valid
//   request, answers what the document says: its success status with a body of the documented
//   schema, or one of its documented errors (last: it splits a group and moves leaders).
import t, { type Test } from 'tap';
import type protobuf from 'protobufjs/light.js';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { parseApiProto } from '../../src/api/client-proto.js';
import { httpStatusOf } from '../../src/http/http-errors.js';
import { buildRequest } from '../../src/http/json-request.js';
import { ROUTES } from '../../src/http/routes.js';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';
import { eventually, TEST_ADMIN_TOKEN } from '../helpers/cluster.js';
import { fillPath, httpBase, httpCall, readStream, type HttpCall } from '../helpers/http-api.js';
import { OpenApiDoc, type Operation } from '../helpers/openapi-check.js';
import { TEST_SECRET } from '../helpers/webhook-sink.js';

type Obj = Record<string, unknown>;
const ADMIN = TEST_ADMIN_TOKEN;
/** A schedule with no slot during the test: every run comes from a trigger or a backfill. */
const YEARLY = '0 0 1 1 *';
const doc = OpenApiDoc.load();
const root = parseApiProto();
root.resolveAll();

/** Calls go to each node in turn: a call for a group led elsewhere is forwarded. */
function rotating(
  ac: ApiCluster,
): (method: string, path: string, call?: HttpCall) => ReturnType<typeof httpCall> {
  let i = 0;
  return (method, path, call) => {
    const node = ac.cluster.nodes[i++ % ac.cluster.nodes.length]!;
    return httpCall(httpBase(node), method, path, call);
  };
}

function errorCode(a: { json: Obj | undefined }): unknown {
  return (a.json?.['details'] as Obj | undefined)?.['error_code'];
}

async function session(t: Test, ac: ApiCluster): Promise<void> {
  const call = rotating(ac);
  const created = await call('POST', '/v1/tenants', {
    token: ADMIN,
    body: { tenantId: 'shop', signingSecret: TEST_SECRET },
  });
  t.equal(created.status, 200, created.text);
  t.equal((created.json?.['tenant'] as Obj)['id'], 'shop');
  const tok = await call('POST', '/v1/tokens', {
    token: ADMIN,
    body: { tenant: 'shop', role: 'writer', description: 'http session' },
  });
  t.equal(tok.status, 200, tok.text);
  const writer = String(tok.json?.['token']);
  t.match(writer, /^tkr_/, 'a writer token, shown once');

  const job = await call('POST', '/v1/tenants/shop/jobs', {
    token: writer,
    body: {
      jobId: 'hello',
      spec: { schedule: YEARLY, target: { url: `${ac.sink.url}/hook` } },
    },
  });
  t.equal(job.status, 200, job.text);
  t.equal(
    ((job.json?.['job'] as Obj)['spec'] as Obj)['tenant'],
    'shop',
    'the path names the tenant',
  );
  const got = await call('GET', '/v1/tenants/shop/jobs/hello', { token: writer });
  t.equal(got.json?.['version'], 1);
  t.equal(typeof got.json?.['createdAtMs'], 'number', 'int64 as a JSON number');

  const trig = await call('POST', '/v1/tenants/shop/jobs/hello:trigger', {
    token: writer,
    body: { payloadJson: '{"from":"http"}' },
  });
  t.equal(trig.status, 200, trig.text);
  const fireId = String((trig.json?.['run'] as Obj)['fireId']);
  t.match(fireId, /^shop\/hello:\d+$/);
  const run = await eventually(async () => {
    const r = await call('GET', `/v1/tenants/shop/runs/${encodeURIComponent(fireId)}`, {
      token: writer,
    });
    if (r.json === undefined || r.json['status'] !== 'RUN_STATUS_SUCCEEDED')
      throw new Error(r.text);
    return r.json;
  }, 10_000);
  t.equal((run['attempts'] as Obj[])[0]?.['statusCode'], 200, 'the sink answered 200');
  t.equal(run['payloadJson'], '{"from":"http"}');
  const runs = await call('GET', '/v1/tenants/shop/jobs/hello/runs', {
    token: writer,
    query: { status: 'RUN_STATUS_SUCCEEDED', page_size: '10' },
  });
  t.same(
    (runs.json?.['runs'] as Obj[]).map((r) => r['fireId']),
    [fireId],
    'the runs list, filtered by status',
  );

  // The DLQ: a job whose endpoint fails, one attempt.
  await call('POST', '/v1/tenants/shop/jobs', {
    token: writer,
    body: {
      jobId: 'flaky',
      spec: {
        schedule: YEARLY,
        target: { url: `${ac.sink.url}/fail` },
        retry: { maxAttempts: 1 },
      },
    },
  });
  const dead = String(
    (
      (await call('POST', '/v1/tenants/shop/jobs/flaky:trigger', { token: writer })).json?.[
        'run'
      ] as Obj
    )['fireId'],
  );
  const dlq = await eventually(async () => {
    const r = await call('GET', '/v1/tenants/shop/dead-runs', { token: writer });
    const found = (r.json?.['runs'] as Obj[] | undefined)?.some((x) => x['fireId'] === dead);
    if (r.json === undefined || found !== true) throw new Error(r.text);
    return r.json;
  }, 10_000);
  t.equal((dlq['runs'] as Obj[])[0]?.['status'], 'RUN_STATUS_DEAD');
  const replay = await call('POST', `/v1/tenants/shop/runs/${encodeURIComponent(dead)}:replay`, {
    token: writer,
  });
  t.equal(replay.status, 200, replay.text);
  const purge = await call('POST', '/v1/tenants/shop/dead-runs:purge', {
    token: writer,
    body: { jobId: 'flaky' },
  });
  t.equal(purge.status, 200, purge.text);
  t.equal(purge.json?.['groups'], 2, 'every group committed the purge');

  // The writer's tenant only, and no admin call.
  t.equal((await call('GET', '/v1/tenants/acme/jobs', { token: writer })).status, 403);
  t.equal((await call('GET', '/v1/tenants', { token: writer })).status, 403);

  // Watching: the job's runs first, then each change, one JSON object per line.
  const base = httpBase(ac.cluster.nodes[1]!);
  let second = '';
  const watched = readStream(`${base}/v1/tenants/shop/jobs/hello/runs:watch`, writer, (l) => {
    const ev = l['result'] as Obj | undefined;
    const r = ev?.['run'] as Obj | undefined;
    if (ev?.['kind'] === 'INITIAL' && second === '') {
      second = 'triggering';
      void call('POST', '/v1/tenants/shop/jobs/hello:trigger', { token: writer }).then((a) => {
        second = String((a.json?.['run'] as Obj)['fireId']);
      });
    }
    return (
      ev?.['kind'] === 'CHANGED' &&
      r?.['fireId'] === second &&
      r['status'] === 'RUN_STATUS_SUCCEEDED'
    );
  });
  const w = await watched;
  t.equal(w.status, 200);
  t.match(w.headers.get('content-type'), /^application\/x-ndjson/);
  t.equal(
    w.lines[0]?.['result'] && ((w.lines[0]['result'] as Obj)['run'] as Obj)['fireId'],
    fireId,
  );
  t.ok(
    w.lines.some(
      (l) =>
        ((l['result'] as Obj)['run'] as Obj)['status'] === 'RUN_STATUS_SUCCEEDED' &&
        ((l['result'] as Obj)['run'] as Obj)['fireId'] === second,
    ),
    'the second trigger was watched to its success',
  );
  for (const l of w.lines) t.same(doc.check(doc.schema('RunEventStreamLine'), l), []);

  // A job with no run yet: the 200 comes as soon as the watch is set up.
  await call('POST', '/v1/tenants/shop/jobs', {
    token: writer,
    body: {
      jobId: 'quiet',
      spec: { schedule: YEARLY, target: { url: `${ac.sink.url}/hook` } },
    },
  });
  const quiet = await readStream(
    `${base}/v1/tenants/shop/jobs/quiet/runs:watch`,
    writer,
    () => true,
    1500,
  );
  t.equal(quiet.status, 200, 'the watch of a job without runs answers at once');
  t.ok(quiet.headersAfterMs < 1000, `without waiting for a first run (${quiet.headersAfterMs} ms)`);
  const missing = await readStream(
    `${base}/v1/tenants/shop/jobs/nope/runs:watch`,
    writer,
    () => true,
  );
  t.equal(missing.status, 404, 'a watch refused before it began is an ordinary error');
  t.match(missing.text, /JOB_NOT_FOUND/);
}

async function errors(t: Test, ac: ApiCluster): Promise<void> {
  const call = rotating(ac);
  const checkShape = (a: { json: Obj | undefined }): void => {
    t.same(doc.check(doc.schema('Error'), a.json), [], 'the Error schema');
  };
  const nope = await call('GET', '/v1/jobs', { token: ADMIN });
  t.equal(nope.status, 404);
  t.equal(errorCode(nope), 'HTTP_NOT_FOUND');
  checkShape(nope);
  const wrong = await call('PATCH', '/v1/tenants/acme/jobs/j1', { token: ADMIN, body: {} });
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.get('allow'), 'GET, PUT, DELETE');
  checkShape(wrong);
  const notJson = await call('POST', '/v1/tenants/acme/jobs', { token: ADMIN, raw: '{"jobId": ' });
  t.equal(notJson.status, 400);
  t.equal(errorCode(notJson), 'HTTP_BODY_INVALID');
  const big = await call('POST', '/v1/tenants/acme/jobs', {
    token: ADMIN,
    body: { jobId: 'big', spec: { payloadJson: JSON.stringify('x'.repeat(1024 * 1024)) } },
  });
  t.equal(big.status, 413);
  t.equal(errorCode(big), 'HTTP_BODY_TOO_LARGE');
  checkShape(big);
  const unknown = await call('POST', '/v1/tenants/acme/jobs', {
    token: ADMIN,
    body: { jobId: 'u', spec: { schedule: 'every 1h', targetUrl: 'x', delivery: 'AT_MOST_ONCE' } },
  });
  t.equal(unknown.status, 400);
  t.same(
    ((unknown.json?.['details'] as Obj)['field_violations'] as Obj[]).map((v) => v['field']),
    ['spec.targetUrl', 'spec.delivery'],
    'each mistake named before anything is sent',
  );
  const invalid = await call('POST', '/v1/tenants/acme/jobs', {
    token: ADMIN,
    body: {
      jobId: 'bad',
      spec: { schedule: '61 * * * *', target: { url: `${ac.sink.url}/hook` } },
    },
  });
  t.equal(invalid.status, 400);
  t.equal(errorCode(invalid), 'JOB_SPEC_INVALID', "the server's own validation");
  t.match(
    (((invalid.json?.['details'] as Obj)['field_violations'] as Obj[])[0] as Obj)['field'],
    /^spec\.schedule/,
  );
  checkShape(invalid);
  const spec = { schedule: YEARLY, target: { url: `${ac.sink.url}/hook` } };
  t.equal(
    (await call('POST', '/v1/tenants/acme/jobs', { token: ADMIN, body: { jobId: 'e1', spec } }))
      .status,
    200,
  );
  const dup = await call('POST', '/v1/tenants/acme/jobs', {
    token: ADMIN,
    body: { jobId: 'e1', spec },
  });
  t.equal(dup.status, 409);
  t.equal(errorCode(dup), 'JOB_ALREADY_EXISTS');
  const stale = await call('PUT', '/v1/tenants/acme/jobs/e1', {
    token: ADMIN,
    body: { spec, expectedVersion: 7 },
  });
  t.equal(stale.status, 409);
  t.equal(errorCode(stale), 'JOB_VERSION_CONFLICT');
  const missing = await call('GET', '/v1/tenants/acme/jobs/nope', { token: ADMIN });
  t.equal(missing.status, 404);
  t.equal(errorCode(missing), 'JOB_NOT_FOUND');
  const anonymous = await call('GET', '/v1/tenants/acme/jobs/e1');
  t.equal(anonymous.status, 401);
  t.equal(anonymous.headers.get('www-authenticate'), 'Bearer');
  t.equal(errorCode(anonymous), 'AUTH_MISSING');
  const malformed = await call('GET', '/v1/admin/cluster', { authorization: `Token ${ADMIN}` });
  t.equal(malformed.status, 401);
  t.equal(errorCode(malformed), 'AUTH_MALFORMED');
  const document = await call('GET', '/v1/openapi.json');
  t.equal(document.status, 200, 'the document needs no token');
  t.equal(document.json?.['openapi'], '3.1.0');
}

/** What each operation is sent in the refusal checks: shaped right, so only the token is wrong. */
function refusalRequest(operationId: string, sinkUrl: string): { params: Obj; body?: Obj } {
  const params = {
    tenant: TENANT,
    job: 'j1',
    fire_id: `${TENANT}/j1:3600000`,
    token_id: 'tok_0000000000000000',
    group_id: '1',
    node_id: 'n3',
  };
  const spec = { schedule: 'every 1h', target: { url: `${sinkUrl}/hook` } };
  const bodies: Record<string, Obj> = {
    JobService_CreateJob: { jobId: 'r1', spec },
    JobService_CreateJobs: { jobs: [{ jobId: 'r2', spec }] },
    JobService_UpdateJob: { spec },
    JobService_BackfillJob: { fromMs: 0, toMs: 3_600_000 },
    JobService_PreviewSchedule: { schedule: 'every 1h', count: 2 },
    RunService_CompleteRun: { fencingToken: 1, outcome: 'ATTEMPT_OUTCOME_SUCCESS' },
    RunService_Heartbeat: { fencingToken: 1 },
    TenantService_CreateTenant: { tenantId: 'refused' },
    TenantService_UpdateTenant: { inflightMax: 7 },
    TokenService_CreateToken: { tenant: TENANT, role: 'writer' },
    AdminService_TransferLeader: { toNode: 'n2' },
    AdminService_AddNode: { nodeId: 'n9', peerAddress: '127.0.0.1:1' },
    AdminService_MoveReplica: { fromNode: 'n1', toNode: 'n2' },
    AdminService_RemoveNode: { force: true },
  };
  const body = bodies[operationId];
  return { params, ...(body === undefined ? {} : { body }) };
}

/** The gRPC API's answer to the same request with the same token: its HTTP status. */
async function grpcAnswer(
  ac: ApiCluster,
  op: Operation,
  params: Obj,
  body: Obj | undefined,
  token: string,
): Promise<number> {
  const route = ROUTES.find((r) => r.method === op.method && r.path === op.path)!;
  const method = root.lookupService(`tickraft.v1.${route.service}`).methods[route.rpc]!;
  const request = buildRequest(route, method.resolvedRequestType as protobuf.Type, {
    params: new Map(Object.entries(params).map(([k, v]) => [k, String(v)])),
    query: new URLSearchParams(),
    body: route.rest === 'body' ? body : undefined,
  });
  const client = new ApiClient(endpointOf(ac.cluster.nodes[2]!), 10_000, {}, { token });
  try {
    if (method.responseStream) {
      const abort = new AbortController();
      setTimeout(() => abort.abort(), 2000);
      await client.stream(route.service, route.rpc, request, () => abort.abort(), abort.signal);
    } else await client.call(route.service, route.rpc, request);
    return 200;
  } catch (err) {
    if (err instanceof ApiCallError) return httpStatusOf(err.status);
    throw err;
  } finally {
    client.close();
  }
}

async function refusals(t: Test, ac: ApiCluster): Promise<void> {
  const admin = ac.client('n1');
  await admin.call('TenantService', 'CreateTenant', { tenantId: 'globex' });
  const other = String(
    (await admin.call<Obj>('TokenService', 'CreateToken', { tenant: 'globex', role: 'writer' }))[
      'token'
    ],
  );
  const call = rotating(ac);
  // The calls that name no tenant: any valid token may make them (docs/SECURITY.md).
  const open = new Set(['JobService_PreviewSchedule', 'AdminService_ClusterStatus']);
  for (const op of doc.operations()) {
    if (op.operationId === 'OpenApiDocument') continue;
    const { params, body } = refusalRequest(op.operationId, ac.sink.url);
    const path = fillPath(op.path, params as Record<string, string>);
    const withBody = body === undefined ? {} : { body };
    const anonymous = await call(op.method, path, withBody);
    t.equal(anonymous.status, 401, `${op.method} ${op.path}: no token`);
    t.equal(errorCode(anonymous), 'AUTH_MISSING');
    const stranger = await call(op.method, path, { ...withBody, token: other });
    const grpc = await grpcAnswer(ac, op, params, body, other);
    t.equal(
      stranger.status,
      grpc,
      `${op.method} ${op.path}: another tenant's writer, as over gRPC`,
    );
    if (open.has(op.operationId)) t.equal(stranger.status, 200, 'names no tenant: allowed');
    else
      t.ok([403, 404].includes(stranger.status), `refused (${stranger.status} ${stranger.text})`);
  }
}

interface Step {
  readonly op: string;
  readonly params?: Record<string, string>;
  readonly query?: Record<string, string>;
  readonly body?: Obj;
  /** The documented error expected (its error code); absent: success. */
  readonly error?: string;
}

async function walk(t: Test, ac: ApiCluster): Promise<void> {
  const ops = new Map(doc.operations().map((o) => [o.operationId, o]));
  const visited = new Set<string>();
  const call = rotating(ac);
  const send = async (s: Step): Promise<Obj> => {
    const op = ops.get(s.op);
    if (op === undefined) throw new Error(`no operation ${s.op} in the document`);
    visited.add(s.op);
    const path = fillPath(op.path, s.params ?? {});
    const responses = doc.responses(op);
    if (op.operationId === 'RunService_WatchRuns') {
      const w = await readStream(`${httpBase(ac.cluster.nodes[0]!)}${path}`, ADMIN, () => true);
      t.equal(w.status, 200, `${s.op}: ${w.text}`);
      for (const l of w.lines) t.same(doc.check(responses.get(200)!, l), [], `${s.op}: a line`);
      return {};
    }
    const a = await call(op.method, path, {
      token: ADMIN,
      ...(s.body === undefined ? {} : { body: s.body }),
      ...(s.query === undefined ? {} : { query: s.query }),
    });
    t.ok(responses.has(a.status), `${s.op}: ${a.status} is documented`);
    if (s.error === undefined) {
      t.equal(a.status, 200, `${op.method} ${op.path}: ${a.text.slice(0, 300)}`);
      t.same(doc.check(responses.get(200)!, a.json), [], `${s.op}: the documented schema`);
    } else {
      t.equal(errorCode(a), s.error, `${op.method} ${op.path}: the documented error ${s.error}`);
      t.same(doc.check(responses.get(a.status) ?? {}, a.json), [], `${s.op}: the Error schema`);
    }
    return a.json ?? {};
  };
  const W = { tenant: 'walk' };
  const target = (path: string, extra: Obj = {}): Obj => ({
    url: `${ac.sink.url}${path}`,
    ...extra,
  });
  await send({
    op: 'TenantService_CreateTenant',
    body: { tenantId: 'walk', signingSecret: TEST_SECRET },
  });
  await send({ op: 'TenantService_GetTenant', params: W });
  await send({ op: 'TenantService_ListTenants', query: { page_size: '10' } });
  await send({
    op: 'TenantService_UpdateTenant',
    params: W,
    body: { priorityWeight: 2, retention: { deadPerJob: 50 } },
  });
  await send({
    op: 'TenantService_RotateSecret',
    params: W,
    body: { gracePeriodMs: 60_000 },
  });
  const tok = await send({
    op: 'TokenService_CreateToken',
    body: { tenant: 'walk', role: 'reader' },
  });
  await send({ op: 'TokenService_ListTokens', query: { tenant: 'walk' } });
  await send({
    op: 'TokenService_RevokeToken',
    params: { token_id: String((tok['info'] as Obj)['id']) },
  });
  await send({
    op: 'JobService_PreviewSchedule',
    body: { schedule: '*/15 9-17 * * 1-5', timezone: 'America/New_York', count: 3 },
  });
  await send({
    op: 'JobService_CreateJob',
    params: W,
    body: {
      jobId: 'j1',
      requestId: 'walk-1',
      spec: { schedule: YEARLY, target: target('/hook') },
    },
  });
  await send({
    op: 'JobService_CreateJobs',
    params: W,
    body: {
      jobs: [
        { jobId: 'j2', spec: { schedule: '0 * * * *', target: target('/hook') } },
        {
          jobId: 'dead',
          spec: { schedule: '0 * * * *', target: target('/fail'), retry: { maxAttempts: 1 } },
        },
        {
          jobId: 'async',
          spec: { schedule: YEARLY, target: target('/async', { completionTimeoutMs: 60_000 }) },
        },
      ],
    },
  });
  const now = Date.now();
  await send({
    op: 'JobService_BackfillJob',
    params: { ...W, job: 'dead' },
    body: { fromMs: now - 2 * 3_600_000, toMs: now },
  });
  const j1 = await send({ op: 'JobService_GetJob', params: { ...W, job: 'j1' } });
  await send({ op: 'JobService_ListJobs', params: W, query: { page_size: '2' } });
  await send({
    op: 'JobService_UpdateJob',
    params: { ...W, job: 'j1' },
    body: {
      spec: { schedule: 'every 2h', target: target('/hook') },
      expectedVersion: j1['version'],
    },
  });
  await send({ op: 'JobService_PauseJob', params: { ...W, job: 'j1' } });
  await send({ op: 'JobService_ResumeJob', params: { ...W, job: 'j1' } });
  const trig = await send({
    op: 'JobService_TriggerJob',
    params: { ...W, job: 'j1' },
    body: { payloadJson: '{"walk":true}', headers: { 'x-walk': '1' } },
  });
  const fire = String((trig['run'] as Obj)['fireId']);
  await send({ op: 'RunService_GetRun', params: { ...W, fire_id: fire } });
  await send({ op: 'RunService_ListRuns', params: { ...W, job: 'j1' }, query: { page_size: '5' } });
  await send({ op: 'RunService_WatchRuns', params: { ...W, job: 'j1' } });
  // Asynchronous completion: the receiver answers 202, then heartbeats and completes.
  const asyncFire = String(
    ((await send({ op: 'JobService_TriggerJob', params: { ...W, job: 'async' } }))['run'] as Obj)[
      'fireId'
    ],
  );
  const accepted = await eventually(async () => {
    const r = ac.sink.receipts.find((x) => x.fireId === asyncFire);
    const run = await httpCall(
      httpBase(ac.cluster.nodes[0]!),
      'GET',
      `/v1/tenants/walk/runs/${encodeURIComponent(asyncFire)}`,
      { token: ADMIN },
    );
    if (
      r === undefined ||
      run.json?.['status'] !== 'RUN_STATUS_RUNNING' ||
      run.json['completeByMs'] === undefined
    )
      throw new Error('not accepted yet');
    return r;
  }, 10_000);
  await send({
    op: 'RunService_Heartbeat',
    params: { ...W, fire_id: asyncFire },
    body: { fencingToken: accepted.token, extendMs: 120_000 },
  });
  await send({
    op: 'RunService_CompleteRun',
    params: { ...W, fire_id: asyncFire },
    body: { fencingToken: accepted.token, outcome: 'ATTEMPT_OUTCOME_SUCCESS', output: 'done' },
  });
  // The completion's output, from the node that served it.
  await send({
    op: 'RunService_GetRunOutput',
    params: { ...W, fire_id: asyncFire },
    query: { offset: '0' },
  });
  const deadFire = await eventually(async () => {
    const r = await httpCall(httpBase(ac.cluster.nodes[1]!), 'GET', '/v1/tenants/walk/dead-runs', {
      token: ADMIN,
    });
    const first = (r.json?.['runs'] as Obj[] | undefined)?.[0];
    if (first === undefined) throw new Error('no dead run yet');
    return String(first['fireId']);
  }, 10_000);
  await send({ op: 'RunService_ListDeadRuns', params: W, query: { page_size: '10' } });
  await send({ op: 'RunService_ReplayRun', params: { ...W, fire_id: deadFire } });
  await send({
    op: 'RunService_PurgeDeadRuns',
    params: W,
    body: { jobId: 'dead', diedBeforeMs: Date.now() },
  });
  await send({ op: 'JobService_DeleteJob', params: { ...W, job: 'j2' } });
  // The cluster: reads and dry runs succeed; the changes a running 3-node cluster refuses are
  // refused with their documented errors.
  const status = await send({ op: 'AdminService_ClusterStatus' });
  const group1 = (status['groups'] as Obj[]).find((g) => g['groupId'] === 1)!;
  await send({ op: 'AdminService_Rebalance', body: { dryRun: true } });
  await send({ op: 'AdminService_DrainNode', params: { node_id: 'n3' }, body: { dryRun: true } });
  await send({ op: 'AdminService_UndrainNode', params: { node_id: 'n3' } });
  await send({
    op: 'AdminService_RemoveNode',
    params: { node_id: 'n3' },
    error: 'META_MEMBER_HAS_REPLICAS',
  });
  await send({
    op: 'AdminService_AddNode',
    body: { nodeId: 'n1', peerAddress: '127.0.0.1:1' },
    error: 'META_MEMBER_EXISTS',
  });
  await send({
    op: 'AdminService_MoveReplica',
    params: { group_id: '1' },
    body: { fromNode: 'n1', toNode: 'n2' },
    error: 'META_MOVE_INVALID',
  });
  await send({
    op: 'AdminService_TransferLeader',
    params: { group_id: '1' },
    body: { toNode: group1['leader'] },
  });
  await send({ op: 'AdminService_BulkPause', params: W });
  await send({ op: 'AdminService_BulkResume', params: W });
  await send({ op: 'AdminService_BulkCancel', params: W });
  await send({ op: 'AdminService_SplitGroup', params: { group_id: '2' } });
  await send({ op: 'OpenApiDocument' });
  t.same(
    [...ops.keys()].filter((k) => !visited.has(k)),
    [],
    'every path and method of the document was called',
  );
}

t.test('the HTTP/JSON API of a 3-node cluster', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2, http: true });
  ac.sink.behaviour = (r) =>
    r.path.startsWith('/fail') ? 500 : r.path.startsWith('/async') ? 202 : 'ok';
  await t.test('a curl-like session: tenant, token, job, trigger, run, runs, DLQ, watch', (t) =>
    session(t, ac),
  );
  await t.test('errors: status, body, headers', (t) => errors(t, ac));
  await t.test('every path refuses no token, and another tenant as gRPC does', (t) =>
    refusals(t, ac),
  );
  await t.test('every path of the OpenAPI document answers as documented', (t) => walk(t, ac));
});
