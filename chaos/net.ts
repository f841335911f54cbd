/**
 * The network of a cluster under test: one Toxiproxy proxy per ordered node pair, and partitions
 * as a few API calls on them.
 *
 * Proxy `<prefix><a>_to_<b>` listens on a free port of a given loopback address and forwards
 * to b's real peer address; node a is started with `--peer-route b=<that port>` (routeArgs), so
 * every Raft message a sends to b crosses it. Nothing else does: b's messages to a, including
 * its answers, travel on b's own connection through `<b>_to_<a>`. Client API calls (and API
 * calls a node forwards to another node's API address) are not proxied.
 *
 * A cut [a, b] (chaos/partitions.ts) blocks the proxy a_to_b in one of two ways:
 * - 'blackhole' (default): a timeout toxic with timeout 0 on both of its streams. Connections
 *   stay open and every byte vanishes, like a DROP rule; new connections are accepted and
 *   blackholed too. Healing removes the toxics, which closes the connections they held, so the
 *   nodes reconnect (a real network would let TCP resume instead).
 * - 'refuse': the proxy is disabled. Live connections close and new ones are refused, like a
 *   REJECT rule; the sender fails fast and backs off.
 */
import type { Proxy, Toxiproxy } from 'toxiproxy-node-client';
import {
  bridge,
  halves,
  isolate,
  majoritiesRing,
  oneWay,
  type Cut,
  type NodeName,
} from './partitions.js';

export type CutMode = 'blackhole' | 'refuse';

export interface PeerEndpoint {
  readonly id: NodeName;
  /** The node's real --peer-listen address. */
  readonly peerAddress: string;
}

const BLACKHOLE_TOXICS = ['partition_upstream', 'partition_downstream'] as const;

export class ClusterNet {
  private readonly proxies = new Map<string, Proxy>();
  private cuts: Cut[] = [];
  private mode: CutMode = 'blackhole';

  private constructor(
    readonly nodes: readonly NodeName[],
    private readonly prefix: string,
  ) {}

  /**
   * Creates (or replaces, through /populate) the N×(N−1) proxies, listening on `listenHost`
   * with ports the proxy server picks.
   */
  static async create(
    toxiproxy: Toxiproxy,
    peers: readonly PeerEndpoint[],
    options: { listenHost: string; prefix?: string },
  ): Promise<ClusterNet> {
    const net = new ClusterNet(
      peers.map((p) => p.id),
      options.prefix ?? '',
    );
    const body = [];
    for (const from of peers) {
      for (const to of peers) {
        if (from.id === to.id) continue;
        body.push({
          name: net.proxyName(from.id, to.id),
          listen: `${options.listenHost}:0`,
          upstream: to.peerAddress,
          enabled: true,
        });
      }
    }
    const created = await toxiproxy.populate(body);
    for (const [name, proxy] of Object.entries(created)) net.proxies.set(name, proxy);
    return net;
  }

  proxyName(from: NodeName, to: NodeName): string {
    return `${this.prefix}${from}_to_${to}`;
  }

  /** The address `from` dials to reach `to`. */
  routeOf(from: NodeName, to: NodeName): string {
    const proxy = this.proxies.get(this.proxyName(from, to));
    if (proxy === undefined) throw new Error(`no proxy ${this.proxyName(from, to)}`);
    return proxy.listen;
  }

  /** The `tickraft serve` flags that send every peer link of `node` through its proxies. */
  routeArgs(node: NodeName): string[] {
    return this.nodes
      .filter((to) => to !== node)
      .flatMap((to) => ['--peer-route', `${to}=${this.routeOf(node, to)}`]);
  }

  /** The cuts in force. */
  get current(): readonly Cut[] {
    return this.cuts;
  }

  /** Heals whatever is cut, then cuts exactly `cuts`. */
  async partition(cuts: readonly Cut[], mode: CutMode = 'blackhole'): Promise<void> {
    await this.heal();
    this.mode = mode;
    await Promise.all(cuts.map((cut) => this.block(cut, mode)));
    this.cuts = [...cuts];
  }

  halves(mode?: CutMode): Promise<void> {
    return this.partition(halves(this.nodes), mode);
  }

  isolate(node: NodeName, mode?: CutMode): Promise<void> {
    return this.partition(isolate(this.nodes, node), mode);
  }

  majoritiesRing(mode?: CutMode): Promise<void> {
    return this.partition(majoritiesRing(this.nodes), mode);
  }

  bridge(mode?: CutMode): Promise<void> {
    return this.partition(bridge(this.nodes), mode);
  }

  oneWay(from: NodeName, to: NodeName, mode?: CutMode): Promise<void> {
    return this.partition(oneWay(from, to), mode);
  }

  /** Undoes every cut (other toxics on the proxies stay). */
  async heal(): Promise<void> {
    const cuts = this.cuts;
    this.cuts = [];
    await Promise.all(cuts.map((cut) => this.unblock(cut, this.mode)));
  }

  /** Deletes this cluster's proxies from the proxy server. */
  async remove(): Promise<void> {
    await Promise.all([...this.proxies.values()].map((p) => p.remove()));
    this.proxies.clear();
  }

  private proxyOf([from, to]: Cut): Proxy {
    const proxy = this.proxies.get(this.proxyName(from, to));
    if (proxy === undefined) throw new Error(`no proxy ${this.proxyName(from, to)}`);
    return proxy;
  }

  private async block(cut: Cut, mode: CutMode): Promise<void> {
    const proxy = this.proxyOf(cut);
    if (mode === 'refuse') {
      await proxy.update({ enabled: false } as Parameters<Proxy['update']>[0]);
      return;
    }
    for (const name of BLACKHOLE_TOXICS) {
      await proxy.addToxic({
        name,
        type: 'timeout',
        stream: name === 'partition_upstream' ? 'upstream' : 'downstream',
        toxicity: 1,
        attributes: { timeout: 0 },
      });
    }
  }

  private async unblock(cut: Cut, mode: CutMode): Promise<void> {
    const proxy = this.proxyOf(cut);
    if (mode === 'refuse') {
      await proxy.update({ enabled: true } as Parameters<Proxy['update']>[0]);
      return;
    }
    for (const name of BLACKHOLE_TOXICS) await (await proxy.getToxic(name)).remove();
  }
}
