// `tickraft serve --advertise-address` with real processes: each node listens on one loopback
// address (A) and advertises another (B), where a TCP relay in this test forwards to A, as a
// published container port or a NAT does. ClusterStatus must report B as each node's api_address
// (and A as its listen_address); a worker given only one endpoint must open its streams to the B
// addresses (the relays count the connections) and run a job's slot through them; and calls the
// nodes forward to each other must keep using A: with every relay closed, jobs are still created
// through every node.
import { createServer, connect, type Server, type Socket } from 'node:net';
import t from 'tap';
import { ApiClient } from '../../src/api/client.js';
import { Worker, type LeasedRun } from '../../src/api/worker-client.js';
import {
  eventually,
  freePort,
  ProcCluster,
  randomLoopbackHost,
  TEST_ADMIN_TOKEN,
} from '../helpers/cluster.js';
import { retryUnavailable } from '../helpers/api-retry.js';

type Obj = Record<string, unknown>;

/** A TCP relay from `host:port` to `to`, counting the connections it took. */
interface Relay {
  readonly address: string;
  connections: number;
  close(): Promise<void>;
}

async function relay(host: string, to: { host: string; port: number }): Promise<Relay> {
  const port = await freePort(host);
  const sockets = new Set<Socket>();
  const r: Relay = {
    address: `${host}:${port}`,
    connections: 0,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((inbound) => {
    r.connections++;
    const outbound = connect(to.port, to.host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return r;
}

t.test('clients are told the advertised address; nodes forward to --listen', async (t) => {
  const cluster = await ProcCluster.create({ groups: 4, extraArgs: ['--tick-ms', '20'] });
  const relays = new Map<string, Relay>();
  const clients: ApiClient[] = [];
  let worker: Worker | undefined;
  t.teardown(async () => {
    await worker?.stop();
    for (const c of clients) c.close();
    cluster.cleanup();
    for (const r of relays.values()) await r.close();
  });
  // The advertised addresses sit on another loopback host than the one the nodes listen on.
  const advertisedHost = randomLoopbackHost();
  for (const n of cluster.nodes) {
    const r = await relay(advertisedHost, { host: n.host, port: n.apiPort });
    relays.set(n.id, r);
    n.ownArgs = ['--advertise-address', r.address];
  }
  cluster.startAll();
  await cluster.waitReady(60_000);
  const n1 = cluster.nodes[0]!;
  const listenOf = (id: string): string => `${cluster.node(id).host}:${cluster.node(id).apiPort}`;
  const direct = new ApiClient(listenOf('n1'), 5000, {}, { token: TEST_ADMIN_TOKEN });
  clients.push(direct);

  const nodes = await eventually(async () => {
    const st = await direct.call<Obj>('AdminService', 'ClusterStatus', {});
    const list = st['nodes'] as Obj[];
    if (
      list.length !== 3 ||
      list.some((n) => n['apiAddress'] !== relays.get(String(n['id']))?.address)
    )
      throw new Error(`not all registered yet: ${JSON.stringify(list)}`);
    return list;
  }, 20_000);
  for (const n of nodes) {
    const id = String(n['id']);
    t.equal(n['apiAddress'], relays.get(id)!.address, `${id}: api_address is the advertised one`);
    t.equal(n['listenAddress'], listenOf(id), `${id}: listen_address is its --listen`);
  }

  // A worker finds the nodes from one endpoint and dials what ClusterStatus advertises.
  await retryUnavailable(() =>
    direct.call('TenantService', 'CreateTenant', {
      tenantId: 'acme',
      signingSecret: 'whsec_dGlja3JhZnQtZGVtby1zZWNyZXQtMDAw',
    }),
  );
  const leased: LeasedRun[] = [];
  worker = new Worker({
    token: TEST_ADMIN_TOKEN,
    endpoints: [`${n1.host}:${n1.apiPort}`],
    workerId: 'w-adv',
    pool: 'adv',
    capacity: 4,
    discoverEveryMs: 500,
    handle: (run) => {
      leased.push(run);
      return Promise.resolve({ output: 'ok' });
    },
  });
  await worker.start();
  const advertised = [...relays.values()].map((r) => r.address).sort();
  await eventually(() => {
    if (JSON.stringify(worker!.nodes) !== JSON.stringify(advertised))
      throw new Error(`worker streams to ${worker!.nodes.join(', ')}`);
    return Promise.resolve();
  }, 10_000);
  t.same(worker.nodes, advertised, 'the worker has a stream to every advertised address');
  await eventually(() => {
    for (const [id, r] of relays)
      if (r.connections === 0) throw new Error(`nothing dialled ${id}'s advertised address`);
    return Promise.resolve();
  }, 10_000);
  await retryUnavailable(() =>
    direct.call('JobService', 'CreateJob', {
      jobId: 'adv-worker',
      requestId: 'adv-worker',
      spec: { tenant: 'acme', schedule: '* * * * * *', target: { url: 'worker:adv' } },
    }),
  );
  await eventually(() => {
    if (!leased.some((r) => r.jobId === 'adv-worker')) throw new Error('no lease yet');
    return Promise.resolve();
  }, 15_000);
  t.pass('a slot of the worker job was leased through an advertised address');
  await worker.stop();
  worker = undefined;

  // Forwarding between nodes does not go through the advertised addresses: with the relays
  // gone, each node still creates jobs of every group (most led by another node).
  for (const r of relays.values()) await r.close();
  let created = 0;
  for (const n of cluster.nodes) {
    const c = new ApiClient(listenOf(n.id), 5000, {}, { token: TEST_ADMIN_TOKEN });
    clients.push(c);
    for (let i = 0; i < 8; i++) {
      await retryUnavailable(() =>
        c.call('JobService', 'CreateJob', {
          jobId: `fwd-${n.id}-${i}`,
          requestId: `fwd-${n.id}-${i}`,
          spec: { tenant: 'acme', schedule: '0 0 1 1 *', target: { url: 'worker:adv' } },
        }),
      );
      created++;
    }
  }
  t.equal(created, 24, 'every node created jobs with the relays closed');
});
