/**
 * The simulated network: per-message loss, delay (which also reorders), duplication, and
 * partitions of any shape as a set of blocked directed links. All chance comes from the seeded
 * Rand handed in, so the same seed gives the same deliveries.
 *
 * Two layers of blocked links: the random faults' (cleared by heal()) and the window scenarios'
 * (window-scenarios.ts: held until the scenario releases them, so a random heal does not end a
 * scripted partition early). healAll() clears both.
 */
import type { SeededRand } from '../../src/base/rand.js';
import type { NodeId } from '../../src/raft/messages.js';

export interface NetworkProfile {
  /** Probability that a message is lost. */
  dropP: number;
  /** Probability that a message is delivered twice. */
  duplicateP: number;
  delayMinMs: number;
  delayMaxMs: number;
  /** Probability of an extra long delay (up to longDelayMs): reorders across many messages. */
  longDelayP: number;
  longDelayMs: number;
}

export const CALM_NETWORK: NetworkProfile = {
  dropP: 0,
  duplicateP: 0,
  delayMinMs: 1,
  delayMaxMs: 5,
  longDelayP: 0,
  longDelayMs: 0,
};

export type PartitionShape = 'isolate-one' | 'halves' | 'one-way' | 'bridge' | 'random-links';

export class SimNetwork {
  profile: NetworkProfile;
  private readonly blocked = new Set<string>();
  private readonly held = new Set<string>();
  dropped = 0;
  duplicated = 0;
  delivered = 0;

  constructor(
    private readonly rand: SeededRand,
    profile: NetworkProfile,
  ) {
    this.profile = profile;
  }

  isBlocked(from: NodeId, to: NodeId): boolean {
    const link = `${from}>${to}`;
    return this.blocked.has(link) || this.held.has(link);
  }

  /** Whether any random-fault link is cut (the scenarios' held links do not count). */
  get partitioned(): boolean {
    return this.blocked.size > 0;
  }

  /** Whether `id` can neither send to nor hear from any of `nodes`. */
  isIsolated(id: NodeId, nodes: readonly NodeId[]): boolean {
    return nodes.every((y) => y === id || (this.isBlocked(id, y) && this.isBlocked(y, id)));
  }

  /** Scenario layer: blocks one direction of one link until released. */
  hold(from: NodeId, to: NodeId): void {
    this.held.add(`${from}>${to}`);
  }

  /** Scenario layer: cuts `id` off from every other node, both ways, until released. */
  holdIsolate(id: NodeId, nodes: readonly NodeId[]): void {
    for (const y of nodes) {
      if (y === id) continue;
      this.hold(id, y);
      this.hold(y, id);
    }
  }

  /** Scenario layer: releases every held link touching `id`. */
  release(id: NodeId): void {
    for (const link of [...this.held]) {
      const [a, b] = link.split('>');
      if (a === id || b === id) this.held.delete(link);
    }
  }

  releaseAll(): void {
    this.held.clear();
  }

  /** Delivery delays for one message: [] when lost, two entries when duplicated. */
  plan(from: NodeId, to: NodeId): number[] {
    if (this.isBlocked(from, to)) {
      this.dropped++;
      return [];
    }
    const p = this.profile;
    if (this.rand.chance(p.dropP)) {
      this.dropped++;
      return [];
    }
    const delay = (): number => {
      let d = p.delayMinMs + this.rand.float() * (p.delayMaxMs - p.delayMinMs);
      if (p.longDelayP > 0 && this.rand.chance(p.longDelayP))
        d += this.rand.float() * p.longDelayMs;
      return d;
    };
    const out = [delay()];
    if (this.rand.chance(p.duplicateP)) {
      this.duplicated++;
      out.push(delay());
    }
    return out;
  }

  /** Applies a partition of the given shape over `nodes`; returns a description for the trace. */
  partition(shape: PartitionShape, nodes: readonly NodeId[]): string {
    const shuffled = nodes.slice();
    for (let i = shuffled.length - 1; i > 0; i--) {
      const j = this.rand.int(i + 1);
      [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
    }
    const cutBoth = (a: NodeId, b: NodeId): void => {
      this.blocked.add(`${a}>${b}`);
      this.blocked.add(`${b}>${a}`);
    };
    switch (shape) {
      case 'isolate-one': {
        const x = shuffled[0]!;
        for (const y of nodes) if (y !== x) cutBoth(x, y);
        return `isolate ${x}`;
      }
      case 'halves': {
        const k = 1 + this.rand.int(Math.max(1, shuffled.length - 1));
        const a = shuffled.slice(0, k);
        const b = shuffled.slice(k);
        for (const x of a) for (const y of b) cutBoth(x, y);
        return `halves ${a.join(',')} | ${b.join(',')}`;
      }
      case 'one-way': {
        const x = shuffled[0]!;
        for (const y of nodes) if (y !== x) this.blocked.add(`${x}>${y}`);
        return `one-way ${x} cannot send`;
      }
      case 'bridge': {
        // Two sides that only the bridge node can reach both of.
        if (shuffled.length < 3) return this.partition('isolate-one', nodes);
        const bridge = shuffled[0]!;
        const rest = shuffled.slice(1);
        const half = Math.ceil(rest.length / 2);
        const a = rest.slice(0, half);
        const b = rest.slice(half);
        for (const x of a) for (const y of b) cutBoth(x, y);
        return `bridge ${bridge} between ${a.join(',')} | ${b.join(',')}`;
      }
      case 'random-links': {
        const cuts: string[] = [];
        for (const x of nodes) {
          for (const y of nodes) {
            if (x !== y && this.rand.chance(0.3)) {
              this.blocked.add(`${x}>${y}`);
              cuts.push(`${x}>${y}`);
            }
          }
        }
        return `links ${cuts.join(' ')}`;
      }
    }
  }

  /** Cuts `id` off from every other node, both ways. */
  isolate(id: NodeId, nodes: readonly NodeId[]): void {
    for (const y of nodes) {
      if (y === id) continue;
      this.blocked.add(`${id}>${y}`);
      this.blocked.add(`${y}>${id}`);
    }
  }

  /** Blocks one direction of one link. */
  cut(from: NodeId, to: NodeId): void {
    this.blocked.add(`${from}>${to}`);
  }

  /** Ends the random faults' partitions (the scenarios' held links stay). */
  heal(): void {
    this.blocked.clear();
  }

  healAll(): void {
    this.blocked.clear();
    this.held.clear();
  }
}
