// The test-only DebugService is off the public port. A real one-node cluster: started without
// --debug-listen, its client API port (--listen) serves the public API but answers UNIMPLEMENTED
// to every DebugService call (Status, Scheduler, Put), and no debug warning is logged. Restarted
// with --debug-listen, the debug port answers DebugService (and only it: JobService there is
// UNIMPLEMENTED), the public port still refuses DebugService, and the node logs a warning that
// the service is test-only and unauthenticated.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { ApiClient, type ApiCallError } from '../../src/api/client.js';
import { loadDebugService } from '../../src/server/debug-service.js';
import { eventually, ProcCluster } from '../helpers/cluster.js';

type Obj = Record<string, unknown>;
type Unary = (
  req: Obj,
  md: grpc.Metadata,
  opts: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: Obj) => void,
) => void;

/** One DebugService call at `address`: its answer, or the gRPC status code it failed with. */
function debugCall(address: string, method: string, req: Obj): Promise<Obj | number> {
  const Ctor = loadDebugService();
  const client = new Ctor(address, grpc.credentials.createInsecure());
  const fn = (client as unknown as Record<string, Unary>)[method]!;
  return new Promise<Obj | number>((resolve) => {
    fn.call(client, req, new grpc.Metadata(), { deadline: Date.now() + 5000 }, (err, res) => {
      client.close();
      resolve(err ? err.code : res);
    });
  }).finally(() => client.close());
}

/** Every group has a leader, as the public AdminService.ClusterStatus reports it. */
async function waitServing(api: ApiClient): Promise<void> {
  await eventually(async () => {
    const st = await api.call<{ groups: { leader: string }[] }>(
      'AdminService',
      'ClusterStatus',
      {},
    );
    if (st.groups.length < 2 || st.groups.some((g) => g.leader === ''))
      throw new Error('not every group has a leader yet');
  }, 60_000);
}

t.test('DebugService is served only on --debug-listen, never on --listen', async (t) => {
  const cluster = await ProcCluster.create({ nodes: 1, groups: 1, debugService: false });
  t.teardown(() => cluster.cleanup());
  const node = cluster.nodes[0]!;
  const apiAddress = `${node.host}:${node.apiPort}`;
  const debugAddress = `${node.host}:${node.debugPort}`;
  const api = new ApiClient(apiAddress, 5000, {}, cluster.clientOptions());
  t.teardown(() => api.close());

  node.start();
  await waitServing(api);
  for (const [method, req] of [
    ['status', {}],
    ['scheduler', { json: JSON.stringify({ op: 'get-job', jobId: 'x' }) }],
    ['put', { key: 'k', value: 'v' }],
  ] as const)
    t.equal(
      await debugCall(apiAddress, method, req),
      grpc.status.UNIMPLEMENTED,
      `DebugService.${method} on --listen: UNIMPLEMENTED`,
    );
  t.notMatch(node.stdout, /DebugService/, 'nothing about a debug service in the log');
  t.equal(await node.term().then((e) => e.code), 0);

  node.start(['--debug-listen', debugAddress]);
  await waitServing(api);
  const status = await eventually(async () => {
    const st = await debugCall(debugAddress, 'status', {});
    if (typeof st === 'number') throw new Error(`status failed with code ${st}`);
    return st;
  }, 20_000);
  t.equal(status['nodeId'], node.id, 'the debug port answers DebugService');
  t.equal(
    await debugCall(apiAddress, 'status', {}),
    grpc.status.UNIMPLEMENTED,
    'the public port still does not',
  );
  const onDebugPort = new ApiClient(debugAddress, 5000);
  t.teardown(() => onDebugPort.close());
  const err = await onDebugPort
    .call('JobService', 'GetJob', { jobId: 'x' })
    .catch((e: unknown) => e);
  t.equal(
    (err as ApiCallError).status,
    grpc.status.UNIMPLEMENTED,
    'the debug port serves no public service',
  );
  t.match(
    node.stdout,
    /"level":40.*"debugListen":"[\d.]+:\d+".*test-only DebugService: unauthenticated/,
    'a warning names the address and says it is test-only',
  );
  t.equal(await node.term().then((e) => e.code), 0, 'stops cleanly');
});
