// Every RPC of every service a node serves, called as each kind of stranger: no token, a
// malformed one, an unknown one, a revoked one, another tenant's writer, the tenant's own reader
// (on a write) and the tenant's own writer (on an admin call). Each call must get the code the
// policy gives it (docs/SECURITY.md), and once every call was made the state read back with the
// admin token must be exactly what it was before: nothing a refused call sent changed anything.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { loadApiServices, type ApiServices } from '../../src/api/proto.js';
import { METHOD_POLICY, type Requirement } from '../../src/auth/method-policy.js';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';

type Obj = Record<string, unknown>;
const OTHER = 'globex';

/** A request each method would accept from the admin: a refusal is then the credential's. */
function requestFor(method: string, sinkUrl: string, tokenId: string): Obj {
  const spec = { tenant: TENANT, schedule: 'every 1h', target: { url: `${sinkUrl}/hook` } };
  const job = { tenant: TENANT, jobId: 'j1' };
  const fire = { tenant: TENANT, fireId: `${TENANT}/j1:3600000` };
  const requests: Record<string, Obj> = {
    'JobService.CreateJob': { jobId: 'm-new', spec },
    'JobService.CreateJobs': { jobs: [{ jobId: 'm-new2', spec }] },
    'JobService.GetJob': job,
    'JobService.UpdateJob': { ...job, spec: { ...spec, schedule: 'every 2h' } },
    'JobService.DeleteJob': job,
    'JobService.ListJobs': { tenant: TENANT },
    'JobService.PauseJob': job,
    'JobService.ResumeJob': job,
    'JobService.TriggerJob': job,
    'JobService.BackfillJob': { ...job, fromMs: 0, toMs: 3_600_000 },
    'JobService.PreviewSchedule': { schedule: 'every 1h', count: 2 },
    'RunService.ListRuns': job,
    'RunService.GetRun': fire,
    'RunService.ListDeadRuns': { tenant: TENANT },
    'RunService.ReplayRun': fire,
    'RunService.PurgeDeadRuns': { tenant: TENANT },
    'RunService.CompleteRun': { ...fire, fencingToken: 1, outcome: 'ATTEMPT_OUTCOME_SUCCESS' },
    'RunService.Heartbeat': { ...fire, fencingToken: 1 },
    'RunService.WatchRuns': job,
    'RunService.GetRunOutput': { ...fire, attempt: 1, offset: 0 },
    'TenantService.CreateTenant': { tenantId: 'm-tenant' },
    'TenantService.GetTenant': { tenantId: TENANT },
    'TenantService.UpdateTenant': { tenantId: TENANT, inflightMax: 7 },
    'TenantService.RotateSecret': { tenantId: TENANT },
    'TenantService.ListTenants': {},
    'TokenService.CreateToken': { tenant: TENANT, role: 'writer' },
    'TokenService.ListTokens': {},
    'TokenService.RevokeToken': { tokenId },
    'AdminService.ClusterStatus': {},
    'AdminService.TransferLeader': { groupId: 1, toNode: 'n2' },
    'AdminService.AddNode': { nodeId: 'n9', peerAddress: '127.0.0.1:1', apiAddress: '127.0.0.1:2' },
    'AdminService.MoveReplica': { groupId: 1, fromNode: 'n1', toNode: 'n2' },
    'AdminService.Rebalance': {},
    'AdminService.BulkPause': { tenant: TENANT },
    'AdminService.BulkResume': { tenant: TENANT },
    'AdminService.BulkCancel': { tenant: TENANT },
    'AdminService.DrainNode': { nodeId: 'n3' },
    'AdminService.SplitGroup': { groupId: 1 },
    'AdminService.UndrainNode': { nodeId: 'n3' },
    'AdminService.RemoveNode': { nodeId: 'n3', force: true },
  };
  // Node-to-node methods: refused before their request is read.
  return requests[method] ?? {};
}

/** What the policy answers a credential that is valid but not enough; undefined: allowed. */
function expectedForTenantToken(
  method: string,
  need: Requirement,
  as: 'other-writer' | 'own-reader' | 'own-writer',
): string | undefined {
  const role = as === 'own-reader' ? 'reader' : 'writer';
  const covers =
    need === 'member' ||
    (need === 'reader' && (role === 'reader' || role === 'writer')) ||
    (need === 'writer' && role === 'writer') ||
    (need === 'completer' && role === 'writer');
  if (!covers) return 'PERMISSION_DENIED';
  // Allowed by role: another tenant's token naming this tenant is still refused, except on the
  // calls that name no tenant (the schedule preview, the cluster's topology).
  if (
    as === 'other-writer' &&
    !['JobService.PreviewSchedule', 'AdminService.ClusterStatus'].includes(method)
  )
    return 'PERMISSION_DENIED';
  return undefined;
}

function codeOf(err: unknown): string {
  if (err instanceof ApiCallError) return grpc.status[err.status] ?? String(err.status);
  if (err && typeof err === 'object' && 'code' in err && typeof err.code === 'number')
    return grpc.status[err.code] ?? String(err.code);
  return `not a gRPC error: ${String(err)}`;
}

/** One unary call with exactly this `authorization` metadata (or none). */
function unary(
  services: ApiServices,
  address: string,
  method: string,
  req: Obj,
  auth: string | undefined,
): Promise<string> {
  const [service, name] = method.split('.') as [keyof ApiServices, string];
  const ctor = services[service];
  const def = ctor.service[name]!;
  const client = new ctor(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  if (auth !== undefined) md.set('authorization', auth);
  return new Promise<string>((resolve) => {
    client.makeUnaryRequest(
      def.path,
      def.requestSerialize,
      def.responseDeserialize,
      req,
      md,
      { deadline: Date.now() + 10_000 },
      (err) => {
        client.close();
        resolve(err ? codeOf(err) : 'OK');
      },
    );
  });
}

/** A server stream opened with this metadata: its error's code, or OK once it sends or waits. */
function serverStream(
  services: ApiServices,
  address: string,
  method: string,
  req: Obj,
  auth: string | undefined,
): Promise<string> {
  const [service, name] = method.split('.') as [keyof ApiServices, string];
  const ctor = services[service];
  const def = ctor.service[name]!;
  const client = new ctor(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  if (auth !== undefined) md.set('authorization', auth);
  const call = client.makeServerStreamRequest(
    def.path,
    def.requestSerialize,
    def.responseDeserialize,
    req,
    md,
    {},
  );
  return new Promise<string>((resolve) => {
    const done = (code: string): void => {
      clearTimeout(timer);
      call.cancel();
      client.close();
      resolve(code);
    };
    // An admitted watch sends the job's runs, or stays open waiting for changes: "allowed".
    const timer = setTimeout(() => done('OK'), 3000);
    call.on('error', (err) => done(codeOf(err)));
    call.on('data', () => done('OK'));
  });
}

/** The Work stream opened with this metadata and a hello: the status it ends with. */
function work(services: ApiServices, address: string, auth: string | undefined): Promise<string> {
  const ctor = services.WorkerService;
  const def = ctor.service['Work']!;
  const client = new ctor(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  if (auth !== undefined) md.set('authorization', auth);
  const call = client.makeBidiStreamRequest(
    def.path,
    def.requestSerialize,
    def.responseDeserialize,
    md,
    {},
  );
  call.write({ hello: { workerId: 'w', pool: 'p', capacity: 1 } });
  return new Promise<string>((resolve) => {
    const done = (code: string): void => {
      clearTimeout(timer);
      call.cancel();
      client.close();
      resolve(code);
    };
    // An admitted stream stays open waiting for leases: that is "allowed".
    const timer = setTimeout(() => done('OK'), 3000);
    call.on('error', (err) => done(codeOf(err)));
    call.on('data', () => undefined);
  });
}

async function stateOf(admin: ApiClient): Promise<Obj> {
  const jobs = async (tenant: string): Promise<unknown> =>
    (
      (await admin.call<Obj>('JobService', 'ListJobs', { tenant, pageSize: 1000 }))['jobs'] as Obj[]
    ).map((j) => [j['id'], j['version'], j['paused']]);
  const status = await admin.call<Obj>('AdminService', 'ClusterStatus', {});
  return {
    acme: await jobs(TENANT),
    globex: await jobs(OTHER),
    tenants: (await admin.call<Obj>('TenantService', 'ListTenants', {}))['tenants'],
    tokens: (await admin.call<Obj>('TokenService', 'ListTokens', {}))['tokens'],
    nodes: (status['nodes'] as Obj[]).map((n) => [n['id'], n['state'], n['apiAddress']]),
    groups: (status['groups'] as Obj[]).map((g) => [
      g['groupId'],
      g['rangeStart'],
      g['rangeEnd'],
      ((g['replicas'] as Obj[] | undefined) ?? []).map((r) => [r['nodeId'], r['jobs']]).sort(),
    ]),
  };
}

t.test('every RPC refuses every stranger, and nothing they sent changes anything', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const admin = ac.client('n1');
  const services = loadApiServices();
  await admin.call('TenantService', 'CreateTenant', { tenantId: OTHER });
  await admin.call('JobService', 'CreateJob', {
    jobId: 'j1',
    spec: ac.spec({ schedule: 'every 1h' }),
  });
  await admin.call('JobService', 'CreateJob', {
    jobId: 'with-header',
    spec: ac.spec({
      schedule: 'every 1h',
      target: { url: `${ac.sink.url}/hook`, headers: { 'x-api-key': 'receiver-secret' } },
    }),
  });
  await admin.call('JobService', 'CreateJob', {
    jobId: 'g1',
    spec: ac.spec({ tenant: OTHER, schedule: 'every 1h' }),
  });
  const token = async (tenant: string, role: string): Promise<{ token: string; id: string }> => {
    const r = await admin.call<Obj>('TokenService', 'CreateToken', { tenant, role });
    return { token: String(r['token']), id: String((r['info'] as Obj)['id']) };
  };
  const ownReader = await token(TENANT, 'reader');
  const ownWriter = await token(TENANT, 'writer');
  const otherWriter = await token(OTHER, 'writer');
  const revoked = await token(TENANT, 'writer');
  await admin.call('TokenService', 'RevokeToken', { tokenId: revoked.id });

  const before = await stateOf(admin);
  const credentials: [
    string,
    string | undefined,
    'other-writer' | 'own-reader' | 'own-writer' | undefined,
  ][] = [
    ['no token', undefined, undefined],
    ['malformed', `Token ${ownWriter.token}`, undefined],
    ['unknown', `Bearer tkr_${randomBytes(32).toString('base64url')}`, undefined],
    ['revoked', `Bearer ${revoked.token}`, undefined],
    ["another tenant's writer", `Bearer ${otherWriter.token}`, 'other-writer'],
    ['own reader', `Bearer ${ownReader.token}`, 'own-reader'],
    ['own writer', `Bearer ${ownWriter.token}`, 'own-writer'],
  ];
  const methods = Object.keys(METHOD_POLICY);
  // Every node serves every method: spread the calls over them (a forwarded call is checked again).
  const nodes = ac.cluster.nodes.map(endpointOf);
  let cells = 0;
  const mismatches: string[] = [];
  for (const [i, method] of methods.entries()) {
    const need = METHOD_POLICY[method]!;
    const address = nodes[i % nodes.length]!;
    for (const [who, auth, as] of credentials) {
      // Calls a credential may make are not this test's business, except the reads it makes
      // to show they still work; writes of an allowed credential would change the state.
      const expected =
        as === undefined ? 'UNAUTHENTICATED' : expectedForTenantToken(method, need, as);
      if (expected === undefined && need !== 'reader' && need !== 'member') continue;
      const got =
        method === 'WorkerService.Work'
          ? await work(services, address, auth)
          : method === 'RunService.WatchRuns'
            ? await serverStream(services, address, method, requestFor(method, '', ''), auth)
            : await unary(
                services,
                address,
                method,
                requestFor(method, ac.sink.url, ownReader.id),
                auth,
              );
      cells++;
      if (
        expected === undefined
          ? got === 'UNAUTHENTICATED' || got === 'PERMISSION_DENIED'
          : got !== expected
      )
        mismatches.push(`${method} as ${who}: ${got}, expected ${expected ?? 'not refused'}`);
    }
  }
  t.same(mismatches, [], `${cells} calls answered as the policy says`);
  t.comment(
    `matrix: ${methods.length} methods × ${credentials.length} credentials, ${cells} calls made`,
  );
  t.ok(cells >= methods.length * 5, 'every method was called by every refused credential');

  // Another tenant's job id reads as a missing one; naming the other tenant is refused.
  const asOther = new ApiClient(nodes[0]!, 5000, {}, { token: otherWriter.token });
  t.teardown(() => asOther.close());
  const msg = async (p: Promise<unknown>): Promise<string> =>
    p.then(
      () => 'OK',
      (err: unknown) =>
        err instanceof ApiCallError ? `${grpc.status[err.status]}: ${err.message}` : String(err),
    );
  const theirs = await msg(asOther.call('JobService', 'GetJob', { jobId: 'j1' }));
  const missing = await msg(asOther.call('JobService', 'GetJob', { jobId: 'never-was' }));
  t.match(theirs, /^NOT_FOUND/, "another tenant's job id: NOT_FOUND");
  t.equal(
    theirs.replace('j1', 'X'),
    missing.replace('never-was', 'X'),
    'worded as for a missing job',
  );
  t.equal(
    await msg(asOther.call('JobService', 'GetJob', { jobId: 'g1' })),
    'OK',
    'its own job, with no tenant named',
  );
  t.match(
    await msg(asOther.call('JobService', 'ListJobs', { tenant: TENANT })),
    /^PERMISSION_DENIED: tenant: the caller's token acts for tenant globex only/,
  );
  t.match(
    await msg(asOther.call('TenantService', 'GetTenant', { tenantId: TENANT })),
    /^PERMISSION_DENIED/,
  );
  t.match(
    await msg(asOther.call('TenantService', 'GetTenant', { tenantId: 'no-such-tenant' })),
    /^PERMISSION_DENIED/,
    'whether or not the tenant exists',
  );
  const own = await asOther.call<Obj>('TenantService', 'GetTenant', { tenantId: OTHER });
  t.notOk(JSON.stringify(own).includes('whsec_'), 'no read returns a signing secret');

  // A reader sees a target header's name, not its value (it may be the receiver's credential).
  const headersAs = async (token: string): Promise<unknown> => {
    const c = new ApiClient(nodes[1]!, 5000, {}, { token });
    try {
      const job = await c.call<Obj>('JobService', 'GetJob', {
        tenant: TENANT,
        jobId: 'with-header',
      });
      return ((job['spec'] as Obj)['target'] as Obj)['headers'];
    } finally {
      c.close();
    }
  };
  t.same(await headersAs(ownReader.token), { 'x-api-key': '(hidden from readers)' });
  t.same(await headersAs(ownWriter.token), { 'x-api-key': 'receiver-secret' }, 'a writer sees it');

  t.same(await stateOf(admin), before, 'the state read back with the admin token is unchanged');
});
