/**
 * A ProcCluster whose every peer link crosses a Toxiproxy proxy (chaos/net.ts): the proxy
 * server runs in its own process (or is the real Toxiproxy at TOXIPROXY_URL), with one proxy per
 * ordered node pair on a loopback address of their own, and each node dials its peers through them
 * (--peer-route). Partitions are `net.isolate(id)`, `net.halves()`, … and `net.heal()`.
 */
import { Toxiproxy } from 'toxiproxy-node-client';
import { ClusterNet } from '../../chaos/net.js';
import { openToxiproxy, type ToxiproxyEndpoint } from '../../chaos/proxy/launch.js';
import { ProcCluster, randomLoopbackHost, type ClusterOptions } from './cluster.js';

let clusterCount = 0;

export class ProxiedCluster {
  private constructor(
    readonly cluster: ProcCluster,
    readonly net: ClusterNet,
    readonly toxiproxy: ToxiproxyEndpoint,
  ) {}

  static async create(opts: ClusterOptions = {}): Promise<ProxiedCluster> {
    const cluster = await ProcCluster.create(opts);
    // The nodes' ports were picked free and released; proxies bound with port 0 on the same host
    // could be handed one of them. Another loopback address cannot collide.
    let host = randomLoopbackHost();
    while (host === cluster.nodes[0]!.host) host = randomLoopbackHost();
    let endpoint: ToxiproxyEndpoint | undefined;
    try {
      endpoint = await openToxiproxy(host);
      const net = await ClusterNet.create(
        new Toxiproxy(endpoint.url),
        cluster.nodes.map((n) => ({ id: n.id, peerAddress: `${n.host}:${n.peerPort}` })),
        // Several clusters may share one external Toxiproxy: names must not collide.
        { listenHost: host, prefix: `c${process.pid}_${++clusterCount}_` },
      );
      for (const n of cluster.nodes) n.ownArgs = net.routeArgs(n.id);
      return new ProxiedCluster(cluster, net, endpoint);
    } catch (err) {
      cluster.cleanup();
      await endpoint?.close();
      throw err;
    }
  }

  /** Kills every node, deletes the proxies and stops a proxy server this helper started. */
  async cleanup(): Promise<void> {
    this.cluster.cleanup();
    await this.net.remove().catch(() => undefined);
    await this.toxiproxy.close();
  }
}
