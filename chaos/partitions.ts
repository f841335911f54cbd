/**
 * Network partitions as sets of directed cuts. A cut [from, to] means every Raft message `from`
 * sends to `to` is lost, while `to` → `from` is untouched: in tickraft each node sends on its own
 * outgoing connection per peer (src/transport/peer-client.ts), so the link from → to is exactly
 * the proxy `from_to_to`. A symmetric partition cuts both directions of every pair across it.
 *
 * The shapes follow Jepsen's nemesis grudges (docs/chaos.md, Partitions). Pure functions of the
 * node list: callers shuffle it first (with a seeded generator) when they want random shapes.
 */
export type NodeName = string;
export type Cut = readonly [from: NodeName, to: NodeName];

/** Both directions of every pair (a, b) with a in `left` and b in `right`. */
export function separate(left: readonly NodeName[], right: readonly NodeName[]): Cut[] {
  const cuts: Cut[] = [];
  for (const a of left) {
    for (const b of right) {
      if (a === b) continue;
      cuts.push([a, b], [b, a]);
    }
  }
  return cuts;
}

/** The first ⌊n/2⌋ nodes against the rest (the smaller half first). */
export function halves(nodes: readonly NodeName[]): Cut[] {
  const half = Math.floor(nodes.length / 2);
  return separate(nodes.slice(0, half), nodes.slice(half));
}

/** One node alone, in both directions. */
export function isolate(nodes: readonly NodeName[], node: NodeName): Cut[] {
  return separate(
    [node],
    nodes.filter((n) => n !== node),
  );
}

/**
 * Every node hears a majority, and no two nodes hear the same majority: in ring order, node i
 * hears only the window of ⌊n/2⌋+1 nodes centred on itself. With 5 nodes the windows are
 * symmetric (i hears i±1); with 3 they cannot be, so each node hears only its successor.
 */
export function majoritiesRing(nodes: readonly NodeName[]): Cut[] {
  const n = nodes.length;
  const size = Math.floor(n / 2) + 1;
  const back = Math.floor((size - 1) / 2);
  const cuts: Cut[] = [];
  nodes.forEach((node, i) => {
    const window = new Set<NodeName>();
    for (let k = 0; k < size; k++) window.add(nodes[(((i - back + k) % n) + n) % n]!);
    for (const other of nodes) if (!window.has(other)) cuts.push([other, node]);
  });
  return cuts;
}

/**
 * Two halves that cannot talk to each other, and one node (the first of the second half) that
 * talks to both: e.g. [n1 n2] n3 [n4 n5].
 */
export function bridge(nodes: readonly NodeName[]): Cut[] {
  const half = Math.floor(nodes.length / 2);
  return separate(nodes.slice(0, half), nodes.slice(half + 1));
}

/** Messages from `from` to `to` are lost; `to` still reaches `from`. */
export function oneWay(from: NodeName, to: NodeName): Cut[] {
  return [[from, to]];
}

/** Who hears whom under `cuts`: node → the peers whose messages reach it. */
export function hearing(
  nodes: readonly NodeName[],
  cuts: readonly Cut[],
): Map<NodeName, Set<NodeName>> {
  const lost = new Set(cuts.map(([from, to]) => `${from}>${to}`));
  return new Map(
    nodes.map((to) => [
      to,
      new Set(nodes.filter((from) => from !== to && !lost.has(`${from}>${to}`))),
    ]),
  );
}
