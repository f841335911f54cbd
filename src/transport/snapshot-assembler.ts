/**
 * Receiver side of SendSnapshot, without the I/O: checks each chunk against the header and
 * copies it into one preallocated buffer. Every rule broken is a MalformedFrameError naming the
 * field, and nothing reaches Raft until the last byte is in and the total matches the header.
 */
import type { NodeId } from '../raft/messages.js';
import { MalformedFrameError } from './errors.js';
import type { GroupMessage, SnapshotChunk, SnapshotHeader } from './wire.js';

export interface SnapshotAssemblerLimits {
  readonly maxSnapshotBytes: number;
  /** Largest data chunk accepted. */
  readonly maxChunkBytes: number;
}

export class SnapshotAssembler {
  private headerValue: SnapshotHeader | undefined;
  private data: Uint8Array = new Uint8Array(0);
  private receivedBytes = 0;

  constructor(
    private readonly selfId: NodeId,
    private readonly limits: SnapshotAssemblerLimits,
  ) {}

  get header(): SnapshotHeader | undefined {
    return this.headerValue;
  }

  get bytesReceived(): number {
    return this.receivedBytes;
  }

  add(chunk: SnapshotChunk): void {
    if (chunk.kind === 'header') {
      this.addHeader(chunk.header);
      return;
    }
    if (this.headerValue === undefined) {
      throw new MalformedFrameError('header', 'the first chunk must carry the header');
    }
    if (chunk.offset !== this.receivedBytes) {
      throw new MalformedFrameError('offset', `is ${chunk.offset}, expected ${this.receivedBytes}`);
    }
    if (chunk.data.length > this.limits.maxChunkBytes) {
      throw new MalformedFrameError(
        'data',
        `chunk of ${chunk.data.length} bytes exceeds ${this.limits.maxChunkBytes}`,
      );
    }
    if (this.receivedBytes + chunk.data.length > this.headerValue.totalBytes) {
      throw new MalformedFrameError('data', `runs past totalBytes ${this.headerValue.totalBytes}`);
    }
    this.data.set(chunk.data, this.receivedBytes);
    this.receivedBytes += chunk.data.length;
  }

  /** The reassembled 'snap' message, once every byte announced by the header has arrived. */
  finish(): GroupMessage {
    const h = this.headerValue;
    if (h === undefined) throw new MalformedFrameError('header', 'no chunk arrived');
    if (this.receivedBytes !== h.totalBytes) {
      throw new MalformedFrameError(
        'data',
        `ended after ${this.receivedBytes} of ${h.totalBytes} bytes`,
      );
    }
    return {
      groupId: h.groupId,
      message: { ...h.message, snapshot: { meta: h.meta, data: this.data } },
    };
  }

  private addHeader(header: SnapshotHeader): void {
    if (this.headerValue !== undefined) {
      throw new MalformedFrameError('header', 'repeated after the first chunk');
    }
    if (header.message.to !== this.selfId) {
      throw new MalformedFrameError(
        'header.message.to',
        `names ${header.message.to}, this node is ${this.selfId}`,
      );
    }
    if (header.totalBytes > this.limits.maxSnapshotBytes) {
      throw new MalformedFrameError(
        'header.totalBytes',
        `${header.totalBytes} exceeds maxSnapshotBytes ${this.limits.maxSnapshotBytes}`,
      );
    }
    this.headerValue = header;
    this.data = new Uint8Array(header.totalBytes);
  }
}
