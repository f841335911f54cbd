/**
 * Plain counters per peer for the metrics layer to read later (observe/ sits above transport/,
 * so the transport only counts). Every field only grows.
 */
import type { NodeId } from '../raft/messages.js';

export interface PeerCounters {
  /** Stream frames written to the peer, the messages in them, and their encoded bytes. */
  sentFrameCount: number;
  sentMessageCount: number;
  sentBytes: number;
  /** Stream frames received from the peer (valid ones), their messages and encoded bytes. */
  receivedFrameCount: number;
  receivedMessageCount: number;
  receivedBytes: number;
  /** Messages to the peer dropped: queue full, peer down or unknown, transport closed. */
  droppedMessageCount: number;
  /** Estimated wire bytes of the dropped messages. */
  droppedBytes: number;
  /** Messages dropped because one alone exceeds maxFrameBytes (also in droppedMessageCount). */
  oversizeDroppedCount: number;
  /** Streams to the peer opened again after a failure. */
  reconnectCount: number;
  /** Snapshot sends to the peer that ended accepted / failed, and snapshots received from it. */
  snapshotSentCount: number;
  snapshotFailedCount: number;
  snapshotReceivedCount: number;
  /** Bytes of snapshot data sent to / received from the peer. */
  snapshotSentBytes: number;
  snapshotReceivedBytes: number;
  /** SendSnapshot data chunks received from the peer. */
  snapshotChunkReceivedCount: number;
  /** Groups the peer reported it does not host (sender side), and notices we sent it. */
  notHostedReceivedCount: number;
  notHostedSentCount: number;
  /** Frames or snapshot chunks from the peer rejected as malformed (the stream is then closed). */
  malformedFrameCount: number;
}

export function newPeerCounters(): PeerCounters {
  return {
    sentFrameCount: 0,
    sentMessageCount: 0,
    sentBytes: 0,
    receivedFrameCount: 0,
    receivedMessageCount: 0,
    receivedBytes: 0,
    droppedMessageCount: 0,
    droppedBytes: 0,
    oversizeDroppedCount: 0,
    reconnectCount: 0,
    snapshotSentCount: 0,
    snapshotFailedCount: 0,
    snapshotReceivedCount: 0,
    snapshotSentBytes: 0,
    snapshotReceivedBytes: 0,
    snapshotChunkReceivedCount: 0,
    notHostedReceivedCount: 0,
    notHostedSentCount: 0,
    malformedFrameCount: 0,
  };
}

/** Sum over peers, for a one-line summary. */
export function sumCounters(all: Iterable<PeerCounters>): PeerCounters {
  const total = newPeerCounters();
  for (const c of all) {
    for (const key of Object.keys(total) as (keyof PeerCounters)[]) total[key] += c[key];
  }
  return total;
}

/** Lazily created counters per peer id. */
export class CounterTable {
  private readonly byPeer = new Map<NodeId, PeerCounters>();

  of(peer: NodeId): PeerCounters {
    let c = this.byPeer.get(peer);
    if (c === undefined) {
      c = newPeerCounters();
      this.byPeer.set(peer, c);
    }
    return c;
  }

  entries(): IterableIterator<[NodeId, PeerCounters]> {
    return this.byPeer.entries();
  }

  total(): PeerCounters {
    return sumCounters(this.byPeer.values());
  }
}
