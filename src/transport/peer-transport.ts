/**
 * PeerTransport: everything a node needs to exchange Raft messages of all its groups with the
 * other nodes, over gRPC (proto/raft.proto).
 *
 * - One PeerClient per peer: a bounded queue and ONE long-lived Stream to that peer, so messages
 *   from this node to a peer arrive in send order, batched: every send() of one event-loop turn
 *   leaves as one frame per peer (split at maxFrameBytes), with the heartbeats of all groups
 *   coalesced into the frame's compact list (wire.ts).
 * - 'snap' messages leave the stream for a SendSnapshot call of their own, chunked and flow
 *   controlled, so a large snapshot does not hold heartbeats back.
 * - One PeerServer receiving every peer's stream and snapshots.
 *
 * No callback runs inside send(): they come from timers and socket events. The Raft runtime
 * calls send() while it holds a Ready, when RawNode refuses reportUnreachable/reportSnapshot.
 * After close() no callback runs at all.
 */
import { assert } from '../base/assert.js';
import type { NodeId } from '../raft/messages.js';
import { CounterTable, type PeerCounters } from './counters.js';
import { TRANSPORT_CLOSED, TransportError, BIND_FAILED } from './errors.js';
import { compileOptions, type CompiledLimits, type PeerTransportOptions } from './options.js';
import { PeerClient } from './peer-client.js';
import { PeerServer } from './peer-server.js';
import { channelCredentials } from './tls.js';
import { UnreachableReporter } from './unreachable-reporter.js';
import { estimateMessageBytes, type GroupMessage, type PeerChannelCredentials } from './wire.js';

export type { GroupMessage } from './wire.js';
export type { PeerCounters } from './counters.js';
export type { PeerTransportLimits, PeerTransportOptions } from './options.js';
export { MalformedFrameError, TransportError } from './errors.js';

type TransportState = 'new' | 'starting' | 'started' | 'closed';

export class PeerTransport {
  readonly nodeId: NodeId;
  readonly limits: CompiledLimits;
  private readonly options: PeerTransportOptions;
  private readonly addresses = new Map<NodeId, string>();
  private readonly clients = new Map<NodeId, PeerClient>();
  /** Clients replaced or removed whose streams are still closing; close() waits for them. */
  private readonly retiring = new Set<PeerClient>();
  private readonly counterTable = new CounterTable();
  private readonly server: PeerServer;
  private readonly unreachable: UnreachableReporter;
  private state: TransportState = 'new';
  private portValue = 0;
  private closing: Promise<void> | undefined;
  /** This node is stopping (setStopping): every frame to every peer says so. */
  private stoppingSelf = false;
  /** Peers whose last frame said they are stopping (a restarted peer's first frame clears it). */
  private readonly stoppingPeers = new Set<NodeId>();
  /** Mutual TLS of the clients (one credentials object for every peer); plaintext when absent. */
  private readonly credentials: PeerChannelCredentials | undefined;

  constructor(options: PeerTransportOptions) {
    this.limits = compileOptions(options);
    this.options = options;
    this.credentials = options.tls && channelCredentials(options.tls);
    this.nodeId = options.nodeId;
    for (const [id, address] of options.peers ?? []) this.addresses.set(id, address);
    this.unreachable = new UnreachableReporter(
      this.limits.unreachableReportIntervalMs,
      options.onUnreachable === undefined
        ? undefined
        : (to, groupIds) => this.whileOpen(() => options.onUnreachable?.(to, groupIds)),
    );
    this.server = new PeerServer({
      selfId: this.nodeId,
      limits: this.limits,
      counters: this.counterTable,
      onMessages: (from, msgs) => this.whileOpen(() => options.onMessages(from, msgs)),
      isGroupHosted: (groupId) => options.isGroupHosted(groupId),
      onPeerStopping: (from, stopping) => {
        if (stopping) this.stoppingPeers.add(from);
        else this.stoppingPeers.delete(from);
      },
      ...(options.tls !== undefined ? { tls: options.tls } : {}),
      onRefused: (peer) => this.whileOpen(() => options.onRefused?.(peer)),
      onPeerStream: (from) =>
        this.whileOpen(() => {
          this.clients.get(from)?.reconnectNow();
          options.onPeerStream?.(from);
        }),
      onPeerStreamEnded: (from) => this.whileOpen(() => options.onPeerStreamEnded?.(from)),
    });
  }

  /** Binds the listen address; resolves to the port actually bound (useful with port 0). */
  async start(): Promise<{ port: number }> {
    if (this.state === 'closed') {
      throw new TransportError(TRANSPORT_CLOSED, `transport of ${this.nodeId} is closed`);
    }
    assert(this.state === 'new', 'PeerTransport.start() called twice');
    this.state = 'starting';
    try {
      this.portValue = await this.server.start(this.options.listen);
    } catch (err) {
      throw new TransportError(BIND_FAILED, `cannot listen on ${this.options.listen}`, {
        cause: err,
        details: { listen: this.options.listen },
      });
    }
    // close() ran while binding: the server it shut down is gone, so this start failed.
    if (this.isClosed()) {
      throw new TransportError(
        TRANSPORT_CLOSED,
        `transport of ${this.nodeId} closed while starting`,
      );
    }
    this.state = 'started';
    return { port: this.portValue };
  }

  /** The bound port; 0 before start() resolved. */
  get port(): number {
    return this.portValue;
  }

  /** Adds a peer or moves it to a new address (its current stream is closed and reopened). */
  setPeer(nodeId: NodeId, address: string): void {
    assert(nodeId !== '' && address !== '', 'setPeer needs a node id and an address');
    if (this.addresses.get(nodeId) === address) return;
    this.addresses.set(nodeId, address);
    this.retireClient(nodeId);
  }

  /** Forgets a peer; its stream is closed and later messages to it are dropped as unreachable. */
  removePeer(nodeId: NodeId): void {
    this.addresses.delete(nodeId);
    this.retireClient(nodeId);
  }

  /**
   * Queues messages for `to`; never blocks and never calls back before returning. Everything
   * sent in this event-loop turn leaves as one frame; 'snap' messages go on their own
   * SendSnapshot call and are reported through onSnapshotStatus.
   */
  send(to: NodeId, msgs: readonly GroupMessage[]): void {
    if (this.state === 'closed') {
      this.countDropped(to, msgs);
      return;
    }
    let streamed: GroupMessage[] | undefined;
    for (const gm of msgs) {
      if (gm.message.type === 'snap') this.sendSnapshot(to, gm);
      else (streamed ??= []).push(gm);
    }
    if (streamed === undefined) return;
    const client = this.clientFor(to);
    if (client === undefined) {
      this.countDropped(to, streamed);
      this.unreachable.note(
        to,
        streamed.map((gm) => gm.groupId),
      );
      return;
    }
    client.enqueue(streamed);
  }

  /** Closes every stream and the server within about closeTimeoutMs; idempotent. */
  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  /** Live counters for one peer (created on first use); read them, do not write them. */
  peerCounters(nodeId: NodeId): Readonly<PeerCounters> {
    return this.counterTable.of(nodeId);
  }

  /** Counters summed over all peers. */
  totalCounters(): PeerCounters {
    return this.counterTable.total();
  }

  /** Frames rejected before their sender was known. */
  get malformedUnknownSenderCount(): number {
    return this.server.malformedUnknownSenderCount;
  }

  /** Estimated wire bytes queued for a peer right now. */
  queuedBytes(nodeId: NodeId): number {
    return this.clients.get(nodeId)?.queuedBytes ?? 0;
  }

  /**
   * Tells every known peer whether this node is stopping, at once (a stream is opened where
   * none is), and marks every later frame so. A node calls it with false once it serves, so a
   * peer that kept the flag from this node's last shutdown learns it is back, and with true
   * when its graceful stop begins, so no peer hands it a leadership meanwhile.
   */
  setStopping(stopping: boolean): void {
    if (this.state === 'closed') return;
    this.stoppingSelf = stopping;
    for (const id of this.addresses.keys()) this.clientFor(id)?.announce(stopping);
  }

  /** Whether the last frame from `nodeId` said it is stopping (it may have exited since). */
  isPeerStopping(nodeId: NodeId): boolean {
    return this.stoppingPeers.has(nodeId);
  }

  /** The connection state towards a peer ('idle' when no stream was ever needed). */
  peerState(nodeId: NodeId): PeerClient['state'] {
    return this.clients.get(nodeId)?.state ?? 'idle';
  }

  private async closeOnce(): Promise<void> {
    this.state = 'closed';
    this.unreachable.close();
    const clients = [...this.clients.values(), ...this.retiring];
    this.clients.clear();
    await Promise.all([...clients.map((c) => c.close()), this.server.close()]);
  }

  private clientFor(to: NodeId): PeerClient | undefined {
    let client = this.clients.get(to);
    if (client !== undefined) return client;
    const address = this.addresses.get(to);
    if (address === undefined) return undefined;
    client = new PeerClient(
      this.nodeId,
      to,
      address,
      this.limits,
      this.counterTable.of(to),
      {
        onDropped: (groupIds) => this.unreachable.note(to, groupIds),
        onNotHosted: (groupIds) =>
          this.whileOpen(() => {
            for (const g of groupIds) this.options.onGroupNotHosted?.(to, g);
          }),
        onConnectFailed: (reason) =>
          this.whileOpen(() => this.options.onConnectFailed?.(to, reason)),
      },
      this.credentials,
    );
    // A client made after setStopping(true) (a peer added, or its address changed) says so too.
    if (this.stoppingSelf) client.announce(true);
    this.clients.set(to, client);
    return client;
  }

  private retireClient(nodeId: NodeId): void {
    const client = this.clients.get(nodeId);
    if (client === undefined) return;
    this.clients.delete(nodeId);
    this.retiring.add(client);
    client.close().then(
      () => this.retiring.delete(client),
      // PeerClient.close() settles every path itself; a rejection here is a bug.
      (err: unknown) => {
        throw err;
      },
    );
  }

  private sendSnapshot(to: NodeId, gm: GroupMessage): void {
    assert(gm.message.snapshot !== undefined, 'a snap message must carry its snapshot');
    const counters = this.counterTable.of(to);
    const report = (ok: boolean): void => {
      if (ok) {
        counters.snapshotSentCount++;
        counters.snapshotSentBytes += gm.message.snapshot?.data.length ?? 0;
      } else {
        counters.snapshotFailedCount++;
      }
      this.whileOpen(() => this.options.onSnapshotStatus?.(gm.groupId, to, ok));
    };
    const client = this.clientFor(to);
    if (client === undefined) {
      setImmediate(() => report(false));
      return;
    }
    client.sendSnapshot(gm, (result) => {
      if (result.ok && result.outcome === 'group-not-hosted') {
        counters.notHostedReceivedCount++;
        this.whileOpen(() => this.options.onGroupNotHosted?.(to, gm.groupId));
      }
      report(result.ok && result.outcome === 'accepted');
    });
  }

  private countDropped(to: NodeId, msgs: readonly GroupMessage[]): void {
    const counters = this.counterTable.of(to);
    for (const gm of msgs) {
      counters.droppedMessageCount++;
      counters.droppedBytes += estimateMessageBytes(gm);
    }
  }

  /** A method, not a field test, so the compiler does not narrow it across an await. */
  private isClosed(): boolean {
    return this.state === 'closed';
  }

  /** Runs a user callback unless the transport is closed: nothing calls back after close(). */
  private whileOpen(fn: () => void): void {
    if (this.state !== 'closed') fn();
  }
}
