/**
 * reset_peer: when the first chunk (or the end of input) arrives, that chunk is dropped and,
 * `timeout` ms later, the stream is closed. Connections accepted while the proxy has a reset_peer
 * toxic close with a TCP RST on both sockets (Toxiproxy sets SO_LINGER 0 on them; here
 * socket.resetAndDestroy()), so the peers see "connection reset by peer"; connections that
 * existed before the toxic get an ordinary close, as in Toxiproxy.
 */
import { Stage, type Attributes, type Chunk } from './stage.js';

export class ResetPeerStage extends Stage {
  private timeoutMs = 0;
  private isResetPending = false;

  protected configure(a: Attributes): void {
    this.timeoutMs = a['timeout'] ?? 0;
  }

  protected handleChunk(chunk: Chunk): void {
    this.drop(chunk);
    this.scheduleReset();
  }

  protected override handleEnd(): void {
    this.scheduleReset();
  }

  /** Toxiproxy's wait cannot be interrupted: a reset already counting down still happens. */
  override remove(): void {
    if (!this.isResetPending) super.remove();
  }

  private scheduleReset(): void {
    this.isResetPending = true;
    this.wait(this.timeoutMs, undefined, () => this.closeOutput());
  }
}
