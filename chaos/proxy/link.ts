/**
 * One proxied connection: the accepted client socket, the socket dialled to the upstream, and a
 * Pipeline per direction (upstream = client → upstream server, downstream = back). The upstream
 * is dialled once per accepted connection; if that fails, the client is disconnected, as in
 * Toxiproxy.
 */
import { connect, type Socket } from 'node:net';
import { isLoopbackHost, parseAddress } from './address.js';
import { Pipeline } from './pipeline.js';
import type { Direction, ToxicSpec } from './toxic.js';

export interface LinkOptions {
  readonly upstream: string;
  /** The proxy's toxics of one direction, in chain order, when the pipelines are built. */
  toxicsOf(direction: Direction): readonly ToxicSpec[];
  readonly random: () => number;
  /** Both sockets close with RST (a reset_peer toxic existed when the client was accepted). */
  readonly isResetOnClose: boolean;
  onClosed(link: Link): void;
}

export class Link {
  private upstreamSocket: Socket | undefined;
  private pipelines: Record<Direction, Pipeline> | undefined;
  private openSocketCount = 1;

  constructor(
    private readonly client: Socket,
    private readonly options: LinkOptions,
  ) {
    this.watch(client);
    client.pause();
    const target = parseAddress(options.upstream);
    if (typeof target === 'string' || !isLoopbackHost(target.host)) {
      // Toxiproxy accepts any upstream text and fails at dial time; so does this server, and
      // it dials loopback only.
      this.close();
      return;
    }
    const upstream = connect({ host: target.host, port: target.port, allowHalfOpen: true });
    this.upstreamSocket = upstream;
    this.openSocketCount++;
    this.watch(upstream);
    upstream.once('connect', () => this.startPipelines(upstream));
  }

  addToxic(spec: ToxicSpec): void {
    this.pipelines?.[spec.direction].addToxic(spec);
  }

  updateToxic(spec: ToxicSpec): void {
    this.pipelines?.[spec.direction].updateToxic(spec);
  }

  removeToxic(spec: ToxicSpec): void {
    this.pipelines?.[spec.direction].removeToxic(spec.name);
  }

  /** The proxy stops (disabled, moved, deleted): both sockets close at once. */
  close(): void {
    for (const socket of [this.client, this.upstreamSocket]) {
      if (socket === undefined || socket.destroyed) continue;
      if (this.options.isResetOnClose) socket.resetAndDestroy();
      else socket.destroy();
    }
  }

  private startPipelines(upstream: Socket): void {
    if (this.client.destroyed) {
      upstream.destroy();
      return;
    }
    const common = {
      random: this.options.random,
      isResetOnClose: () => this.options.isResetOnClose,
    };
    this.pipelines = {
      upstream: new Pipeline({
        ...common,
        source: this.client,
        dest: upstream,
        toxics: this.options.toxicsOf('upstream'),
      }),
      downstream: new Pipeline({
        ...common,
        source: upstream,
        dest: this.client,
        toxics: this.options.toxicsOf('downstream'),
      }),
    };
    this.client.resume();
  }

  private watch(socket: Socket): void {
    // Resets and broken pipes are part of the job here; 'close' follows and ends the link.
    socket.on('error', () => {});
    socket.once('close', () => {
      if (--this.openSocketCount > 0) {
        // Before the pipelines exist nothing forwards the close: do it here.
        if (this.pipelines === undefined) this.close();
        return;
      }
      this.pipelines?.upstream.dispose();
      this.pipelines?.downstream.dispose();
      this.options.onClosed(this);
    });
  }
}
