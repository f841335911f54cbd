/**
 * The nemesis schedule of a chaos run: from one seed, a sequence of faults drawn from the
 * families given on the command line, one at a time or two together, each held a few seconds,
 * with quiet gaps between them so recovery is measured; leadership transfers issued while faults
 * are in force. Every fault's start and end is a NemesisRecord in the nemesis history. `healAll`
 * is the final generator: it ends whatever is in force (restart, SIGCONT, heal, clocks reset).
 */
import type { Toxiproxy } from 'toxiproxy-node-client';
import type { ApiClient } from '../../src/api/client.js';
import { SeededRand } from '../../src/base/rand.js';
import type { ProcCluster, ProcNode } from '../../test/helpers/cluster.js';
import type { NemesisKind, NemesisRecord, PartitionShape } from '../history/format.js';
import type { HistoryWriter } from '../history/jsonl.js';
import type { ClusterNet } from '../net.js';
import type { NodeClocks } from './clock.js';
import {
  MembershipNemesis,
  type MembershipCounts,
  type MembershipFault,
  type SettleReport,
} from './membership.js';
import { partition, PARTITION_SHAPES, slowLinks } from './network.js';
import { killNode, pauseNode, restartNode, resumeNode } from './process.js';

export const NEMESIS_FAMILIES = [
  'kill',
  'pause',
  'partition',
  'network',
  'clock',
  'transfer',
  'membership',
] as const;
export type NemesisFamily = (typeof NEMESIS_FAMILIES)[number];

export interface NemesisOptions {
  readonly seed: number;
  readonly families: readonly NemesisFamily[];
  readonly cluster: ProcCluster;
  readonly net: ClusterNet;
  readonly toxiproxy: Toxiproxy;
  /** Undefined when the nodes run without libfaketime (no clock family). */
  readonly clocks: NodeClocks | undefined;
  readonly clients: readonly ApiClient[];
  readonly history: HistoryWriter;
  readonly now: () => number;
  /** Raft election timeout of the nodes, ms: pauses are held longer than this. */
  readonly electionTimeoutMs: number;
  /** Largest clock offset applied, ms (keep it below R: see docs/chaos.md). */
  readonly clockOffsetMaxMs: number;
  /** Fault length and quiet gap ranges, ms. */
  readonly faultMs?: readonly [number, number];
  readonly gapMs?: readonly [number, number];
  /** Gap between two membership operations, ms. */
  readonly membershipGapMs?: readonly [number, number] | undefined;
}

interface Active {
  readonly faultId: string;
  readonly kind: NemesisKind;
  readonly targets: readonly string[];
  readonly shape?: PartitionShape;
  readonly spec?: Record<string, unknown>;
  readonly end: () => Promise<void>;
}

export interface NemesisCounts {
  faults: number;
  byKind: Record<string, number>;
  transfers: number;
  /** Transfers not issued: no node answered ClusterStatus in time. */
  transfersSkipped: number;
  /** The membership family's operations (undefined without it). */
  membership: MembershipCounts | undefined;
  /** What the final heal's wait for replica moves found (membership family only). */
  settled: SettleReport | undefined;
}

/** The membership family needs a node free of each group (groups have 3 replicas). */
export const MEMBERSHIP_NODES_MIN = 4;
/** How long the final heal waits for replica moves to finish. */
const SETTLE_MS = 240_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class NemesisRunner {
  private readonly rand: SeededRand;
  private readonly active = new Map<string, Active>();
  private nextFault = 0;
  private stopping = false;
  readonly counts: NemesisCounts = {
    faults: 0,
    byKind: {},
    transfers: 0,
    transfersSkipped: 0,
    membership: undefined,
    settled: undefined,
  };
  private partitioned = false;
  private readonly membership: MembershipNemesis | undefined;

  constructor(private readonly o: NemesisOptions) {
    this.rand = new SeededRand(o.seed);
    if (o.families.includes('membership')) {
      if (o.cluster.nodes.length < MEMBERSHIP_NODES_MIN)
        throw new Error(
          `the membership nemesis needs ${MEMBERSHIP_NODES_MIN} nodes or more, got ${o.cluster.nodes.length}`,
        );
      // A source of its own: its draws do not depend on how its calls interleave with faults.
      this.membership = new MembershipNemesis({
        seed: o.seed ^ 0x3e3b,
        cluster: o.cluster,
        clients: o.clients,
        now: o.now,
        nextFaultId: () => `f${++this.nextFault}`,
        record: (phase, f) => this.recordMembership(phase, f),
        gapMs: o.membershipGapMs,
      });
      this.counts.membership = this.membership.counts;
    }
  }

  private recordMembership(phase: 'start' | 'end', f: MembershipFault): void {
    this.record(phase, f);
    if (phase === 'start') this.counts.byKind[f.kind] = (this.counts.byKind[f.kind] ?? 0) + 1;
  }

  private between([lo, hi]: readonly [number, number]): number {
    return lo + this.rand.int(hi - lo + 1);
  }

  private record(phase: 'start' | 'end', a: Omit<Active, 'end'>): void {
    const r: NemesisRecord = {
      type: 'nemesis',
      t: this.o.now(),
      phase,
      faultId: a.faultId,
      kind: a.kind,
      targets: a.targets,
      ...(a.shape === undefined ? {} : { shape: a.shape }),
      ...(a.spec === undefined ? {} : { spec: a.spec }),
    };
    this.o.history.append(r);
  }

  /** Runs faults (and membership operations beside them) until `until` (driver ms). */
  async run(until: number): Promise<void> {
    await Promise.all([this.runFaults(until), this.membership?.run(until)]);
  }

  private async runFaults(until: number): Promise<void> {
    const faultFamilies = this.o.families.filter((f) => f !== 'transfer' && f !== 'membership');
    const transfers = this.o.families.includes('transfer');
    await sleep(this.between(this.o.gapMs ?? [4000, 8000]));
    // Families come in rounds, each a seeded shuffle of all of them, so every family given is
    // exercised early even in a short run.
    let round: NemesisFamily[] = [];
    while (!this.stopping && this.o.now() < until) {
      if (round.length === 0) round = this.shuffled(faultFamilies);
      const first = round.shift();
      const picked = new Set<NemesisFamily>();
      if (first !== undefined) picked.add(first);
      // Combined faults: a second family about a third of the time.
      if (faultFamilies.length > 1 && this.rand.chance(0.35)) {
        picked.add(faultFamilies[this.rand.int(faultFamilies.length)]!);
      }
      for (const family of picked) await this.begin(family);
      const holdMs = this.between(this.o.faultMs ?? [3000, 8000]);
      if (transfers && (picked.size === 0 || this.rand.chance(0.6))) {
        await sleep(this.rand.int(Math.floor(holdMs / 2)));
        await this.transfer();
        await sleep(Math.floor(holdMs / 2));
      } else {
        await sleep(holdMs);
      }
      await this.endAll();
      if (this.stopping || this.o.now() >= until) break;
      await sleep(this.between(this.o.gapMs ?? [4000, 8000]));
    }
    await this.endAll();
  }

  stop(): void {
    this.stopping = true;
    this.membership?.stop();
  }

  private shuffled<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.rand.int(i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  private async begin(family: NemesisFamily): Promise<void> {
    const nodes = this.o.cluster.nodes;
    const faultId = `f${++this.nextFault}`;
    const pickNode = (): ProcNode => {
      const up = nodes.filter((n) => n.running && !n.paused);
      return up[this.rand.int(up.length)] ?? nodes[0]!;
    };
    let a: Active | undefined;
    switch (family) {
      case 'kill': {
        const node = pickNode();
        const at = {
          faultId,
          kind: 'kill' as const,
          targets: [node.id],
          spec: { signal: 'SIGKILL' },
        };
        this.record('start', at);
        const pid = await killNode(node);
        a = {
          ...at,
          spec: { signal: 'SIGKILL', pid },
          end: () => Promise.resolve(restartNode(node)),
        };
        break;
      }
      case 'pause': {
        const node = pickNode();
        const at = {
          faultId,
          kind: 'pause' as const,
          targets: [node.id],
          spec: { signal: 'SIGSTOP', electionTimeoutMs: this.o.electionTimeoutMs },
        };
        this.record('start', at);
        pauseNode(node);
        a = { ...at, end: () => Promise.resolve(resumeNode(node)) };
        break;
      }
      case 'partition': {
        if (this.partitioned) return;
        const shape = PARTITION_SHAPES[this.rand.int(PARTITION_SHAPES.length)]!;
        // Recorded before the cuts go in, so the fault window covers their whole effect.
        const pre = { faultId, kind: 'partition' as const, targets: [] as string[], shape };
        this.record('start', pre);
        const targets = await partition(this.o.net, shape, (n) => this.rand.int(n));
        this.partitioned = true;
        a = {
          ...pre,
          targets,
          end: async () => {
            await this.o.net.heal();
            this.partitioned = false;
          },
        };
        break;
      }
      case 'network': {
        const node = pickNode();
        const latency = this.rand.chance(0.6);
        const slow = latency
          ? {
              type: 'latency' as const,
              latency: 50 + this.rand.int(250),
              jitter: this.rand.int(100),
            }
          : { type: 'bandwidth' as const, rate: 20 + this.rand.int(80) };
        if ([...this.active.values()].some((x) => x.kind === slow.type)) return;
        const at = { faultId, kind: slow.type, targets: [node.id], spec: { ...slow } };
        this.record('start', at);
        const undo = await slowLinks(this.o.toxiproxy, this.o.net, [node.id], slow);
        a = { ...at, end: undo };
        break;
      }
      case 'clock':
        a = this.beginClock(faultId, pickNode);
        break;
      case 'transfer':
      case 'membership':
        return;
    }
    if (a === undefined) return;
    this.active.set(faultId, a);
    this.counts.faults++;
    this.counts.byKind[a.kind] = (this.counts.byKind[a.kind] ?? 0) + 1;
  }

  /** A clock fault on one node: a bump, a strobe or a drift, drawn. */
  private beginClock(faultId: string, pickNode: () => ProcNode): Active | undefined {
    const clocks = this.o.clocks;
    if (clocks === undefined) return undefined;
    if ([...this.active.values()].some((x) => x.kind.startsWith('clock'))) return undefined;
    const node = pickNode();
    const style = this.rand.int(3);
    const max = this.o.clockOffsetMaxMs;
    const offset = () =>
      (this.rand.chance(0.5) ? -1 : 1) * (50 + this.rand.int(Math.max(1, max - 50)));
    if (style === 0) {
      const off = offset();
      const at = {
        faultId,
        kind: 'clock-bump' as const,
        targets: [node.id],
        spec: { offsetMs: off },
      };
      this.record('start', at);
      const spec = clocks.bump(node.id, off);
      return {
        ...at,
        spec: { offsetMs: off, faketime: spec },
        end: () => Promise.resolve(clocks.reset(node.id)),
      };
    } else if (style === 1) {
      const off = offset();
      const periodMs = 1000 + this.rand.int(1000);
      const at = {
        faultId,
        kind: 'clock-strobe' as const,
        targets: [node.id],
        spec: { offsetMs: off, periodMs },
      };
      this.record('start', at);
      let on = true;
      clocks.bump(node.id, off);
      const timer = setInterval(() => {
        on = !on;
        if (on) clocks.bump(node.id, off);
        else clocks.reset(node.id);
      }, periodMs);
      return {
        ...at,
        end: () => {
          clearInterval(timer);
          clocks.reset(node.id);
          return Promise.resolve();
        },
      };
    } else {
      // Rates near 1 (slow rates also stretch epoll timeouts); the offset reached
      // over the fault stays within the bound.
      const rate = 1 + (this.rand.chance(0.5) ? -1 : 1) * (0.01 + this.rand.float() * 0.04);
      const at = { faultId, kind: 'clock-drift' as const, targets: [node.id], spec: { rate } };
      this.record('start', at);
      const spec = clocks.drift(node.id, rate, node.startedAtMs, Date.now());
      return {
        ...at,
        spec: { rate, faketime: spec },
        end: () => Promise.resolve(clocks.reset(node.id)),
      };
    }
  }

  private async endAll(): Promise<void> {
    for (const [id, a] of [...this.active]) {
      try {
        await a.end();
      } finally {
        this.active.delete(id);
        this.record('end', a);
      }
    }
  }

  /** A leadership transfer of one data group to a drawn node, recorded as a short fault. */
  private async transfer(): Promise<void> {
    const up = this.o.cluster.nodes.filter((n) => n.running && !n.paused);
    if (up.length === 0) return;
    // Asked through a node that runs (clients[i] is the API of cluster.nodes[i]).
    const via = up[this.rand.int(up.length)]!;
    const client = this.o.clients[this.o.cluster.nodes.indexOf(via)] ?? this.o.clients[0]!;
    const faultId = `f${++this.nextFault}`;
    let groups: number[] = [];
    try {
      const st = await client.call<Record<string, unknown>>(
        'AdminService',
        'ClusterStatus',
        {},
        8000,
      );
      groups = (st['groups'] as Record<string, unknown>[])
        .map((g) => Number(g['groupId']))
        .filter((g) => g !== 0);
    } catch {
      this.counts.transfersSkipped++;
      return; // no view of the groups during this fault: no transfer this time
    }
    if (groups.length === 0) return;
    const groupId = groups[this.rand.int(groups.length)]!;
    const to = up[this.rand.int(up.length)]!.id;
    const at = { faultId, kind: 'leader-transfer' as const, targets: [to], spec: { groupId } };
    this.record('start', at);
    let outcome = 'ok';
    try {
      await client.call('AdminService', 'TransferLeader', { groupId, toNode: to }, 10_000);
    } catch (err) {
      outcome = err instanceof Error ? err.message.slice(0, 120) : String(err);
    }
    this.counts.transfers++;
    this.counts.byKind['leader-transfer'] = (this.counts.byKind['leader-transfer'] ?? 0) + 1;
    this.record('end', { ...at, spec: { groupId, outcome } });
  }

  /**
   * The final generator: ends every fault in force and makes sure every node runs; then gives
   * a drained node its replicas back and waits until no replica move is in flight.
   */
  async healAll(): Promise<void> {
    this.stop();
    await this.endAll();
    await this.o.net.heal().catch(() => undefined);
    for (const n of this.o.cluster.nodes) {
      resumeNode(n);
      restartNode(n);
      this.o.clocks?.reset(n.id);
    }
    if (this.membership) this.counts.settled = await this.membership.settle(SETTLE_MS);
  }
}
