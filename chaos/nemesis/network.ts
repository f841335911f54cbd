/**
 * Network faults on the proxied peer links (chaos/net.ts): the partition shapes, and slow links
 * as latency or bandwidth toxics on every proxy out of and into chosen nodes. Toxics are named
 * apart from the partition's, so a slow link and a partition can be in force together.
 */
import type { Toxic, Toxiproxy } from 'toxiproxy-node-client';
import type { ClusterNet } from '../net.js';
import type { PartitionShape } from '../history/format.js';

export const PARTITION_SHAPES: readonly PartitionShape[] = [
  'halves',
  'isolate-one',
  'majorities-ring',
  'bridge',
  'one-way',
];

/** Applies `shape`; returns the node names or links it targets. */
export async function partition(
  net: ClusterNet,
  shape: PartitionShape,
  pick: (n: number) => number,
): Promise<string[]> {
  const nodes = [...net.nodes];
  switch (shape) {
    case 'halves':
      await net.halves();
      return nodes;
    case 'isolate-one': {
      const id = nodes[pick(nodes.length)]!;
      await net.isolate(id);
      return [id];
    }
    case 'majorities-ring':
      await net.majoritiesRing();
      return nodes;
    case 'bridge':
      await net.bridge();
      return nodes;
    case 'one-way': {
      const from = nodes[pick(nodes.length)]!;
      const others = nodes.filter((n) => n !== from);
      const to = others[pick(others.length)]!;
      await net.oneWay(from, to);
      return [`${from}->${to}`];
    }
  }
}

export type SlowLink =
  | { readonly type: 'latency'; readonly latency: number; readonly jitter: number }
  | { readonly type: 'bandwidth'; readonly rate: number };

/** Slows every link to and from `nodes`; returns an undo. */
export async function slowLinks(
  toxiproxy: Toxiproxy,
  net: ClusterNet,
  nodes: readonly string[],
  slow: SlowLink,
): Promise<() => Promise<void>> {
  const names = new Set<string>();
  for (const a of nodes)
    for (const b of net.nodes)
      if (a !== b) {
        names.add(net.proxyName(a, b));
        names.add(net.proxyName(b, a));
      }
  const toxicName = `chaos_${slow.type}`;
  const attributes =
    slow.type === 'latency' ? { latency: slow.latency, jitter: slow.jitter } : { rate: slow.rate };
  const added: Toxic<unknown>[] = [];
  for (const name of names) {
    const proxy = await toxiproxy.get(name);
    added.push(
      await proxy.addToxic({
        name: toxicName,
        type: slow.type,
        stream: 'upstream', // a_to_b carries a's messages to b upstream
        toxicity: 1,
        attributes,
      }),
    );
  }
  return async () => {
    for (const toxic of added) await toxic.remove().catch(() => undefined);
  };
}
