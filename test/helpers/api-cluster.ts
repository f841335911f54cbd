/**
 * A real cluster for the public API tests: nodes, a webhook sink, a tenant created through
 * TenantService, one ApiClient per node, and a wait until every node's API address is in the
 * meta group (forwarding needs it). Torn down with the test.
 */
import type { Test } from 'tap';
import { status as grpcStatus } from '@grpc/grpc-js';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { retryUnavailable } from './api-retry.js';
import { eventually, ProcCluster, type ProcNode, TEST_ADMIN_TOKEN } from './cluster.js';
import { TEST_SECRET, WebhookSink } from './webhook-sink.js';

export const TENANT = 'acme';
type Obj = Record<string, unknown>;

export class ApiCluster {
  private constructor(
    readonly cluster: ProcCluster,
    readonly sink: WebhookSink,
    readonly clients: Map<string, ApiClient>,
  ) {}

  static async start(
    t: Test,
    opts: {
      groups?: number;
      metrics?: boolean;
      http?: boolean;
      allowTarget?: readonly string[];
      /** More flags for every node. */
      extraArgs?: readonly string[];
    } = {},
  ): Promise<ApiCluster> {
    const cluster = await ProcCluster.create({
      groups: opts.groups ?? 4,
      extraArgs: ['--tick-ms', '20', ...(opts.extraArgs ?? [])],
      metrics: opts.metrics ?? false,
      http: opts.http ?? false,
      // The harness's default (loopback, where the sink listens) unless the test says otherwise.
      ...(opts.allowTarget === undefined ? {} : { allowTarget: opts.allowTarget }),
    });
    const sink = new WebhookSink([TEST_SECRET]);
    const clients = new Map<string, ApiClient>();
    t.teardown(async () => {
      for (const c of clients.values()) c.close();
      cluster.cleanup();
      await sink.close();
    });
    await sink.start();
    cluster.startAll();
    await cluster.waitReady(60_000);
    for (const n of cluster.nodes)
      clients.set(n.id, new ApiClient(endpointOf(n), 5000, {}, { token: TEST_ADMIN_TOKEN }));
    const ac = new ApiCluster(cluster, sink, clients);
    await eventually(async () => {
      const st = await ac.client('n1').call<Obj>('AdminService', 'ClusterStatus', {});
      const nodes = st['nodes'] as Obj[];
      if (nodes.length !== cluster.nodes.length || nodes.some((n) => n['apiAddress'] === ''))
        throw new Error('API addresses not all registered');
    }, 20_000);
    await leadersSettled(ac.client('n1'));
    await createTenantCarefully(ac.client('n2'), { tenantId: TENANT, signingSecret: TEST_SECRET });
    return ac;
  }

  client(nodeId: string): ApiClient {
    const c = this.clients.get(nodeId);
    if (!c) throw new Error(`no client for ${nodeId}`);
    return c;
  }

  /** Group → leader node id, from ClusterStatus. */
  async leaders(via = 'n1'): Promise<Map<number, string>> {
    const st = await this.client(via).call<Obj>('AdminService', 'ClusterStatus', {});
    return new Map(
      (st['groups'] as Obj[]).map((g) => [g['groupId'] as number, g['leader'] as string]),
    );
  }

  spec(extra: Obj = {}): Obj {
    return {
      tenant: TENANT,
      schedule: '* * * * * *',
      target: { url: `${this.sink.url}/hook` },
      ...extra,
    };
  }
}

/**
 * In a cluster's first seconds leader balancing hands each data group to its planned leader, and a
 * write that meets a hand-over answers UNAVAILABLE: a test starts once that is over, waiting (at
 * most `withinMs`, usually not at all) until every data group is led by its preferred leader, or
 * by the first replica of its plan. A group that stays elsewhere is the test's to meet.
 */
export async function leadersSettled(c: ApiClient, withinMs = 15_000): Promise<void> {
  await eventually(async () => {
    const st = await c.call<Obj>('AdminService', 'ClusterStatus', {});
    const moving = (st['groups'] as Obj[]).filter((g) => {
      const planned = (g['replicas'] as Obj[] | undefined)?.[0]?.['nodeId'];
      return g['groupId'] !== 0 && g['leader'] !== (g['preferredLeader'] || planned);
    });
    if (moving.length > 0) throw new Error(`${moving.length} groups not with their leader yet`);
  }, withinMs).catch(() => undefined);
}

/**
 * CreateTenant as a careful client sends it: UNAVAILABLE (a meta leader changing on a loaded
 * machine, the outcome unknown) is retried after the hint, and ALREADY_EXISTS on a retry means
 * an earlier try committed.
 */
export async function createTenantCarefully(c: ApiClient, req: Obj): Promise<void> {
  let tried = false;
  await retryUnavailable(async () => {
    try {
      await c.call('TenantService', 'CreateTenant', req);
    } catch (err) {
      if (tried && err instanceof ApiCallError && err.status === grpcStatus.ALREADY_EXISTS) return;
      tried = true;
      throw err;
    }
  });
}

export function endpointOf(n: ProcNode): string {
  return `${n.host}:${n.apiPort}`;
}
