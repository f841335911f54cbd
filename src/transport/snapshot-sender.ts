/**
 * Sender side of SendSnapshot: one call per snapshot, a header chunk, then the data in chunks of
 * at most snapshotChunkBytes. It writes only while the call accepts more (write() returning false
 * means HTTP/2 flow control is full: wait for 'drain'), so a multi-megabyte snapshot never sits
 * in memory twice, and it stops writing as soon as the receiver answers early.
 */
import { assert } from '../base/assert.js';
import {
  decodeSnapshotAck,
  encodeSnapshotData,
  encodeSnapshotHeader,
  type GroupMessage,
  type RaftTransportClient,
  type SnapshotOutcome,
} from './wire.js';

export type SnapshotSendResult =
  | { readonly ok: true; readonly outcome: SnapshotOutcome }
  | { readonly ok: false; readonly error: Error };

export interface SnapshotSend {
  /** Abandons the send; the result callback then reports a failure (CANCELLED). */
  cancel(): void;
}

export function startSnapshotSend(
  rpc: RaftTransportClient,
  gm: GroupMessage,
  options: { readonly chunkBytes: number; readonly deadlineMs: number },
  done: (result: SnapshotSendResult) => void,
): SnapshotSend {
  const snapshot = gm.message.snapshot;
  assert(
    gm.message.type === 'snap' && snapshot !== undefined,
    'startSnapshotSend needs a snapshot',
  );
  const data = snapshot.data;
  let finished = false;

  const call = rpc.sendSnapshot(options.deadlineMs, (err, ack) => {
    finished = true;
    if (err !== null) {
      done({ ok: false, error: err });
      return;
    }
    try {
      assert(ack !== undefined, 'grpc-js answered a unary call with neither error nor response');
      done({ ok: true, outcome: decodeSnapshotAck(ack) });
    } catch (decodeErr) {
      done({ ok: false, error: decodeErr as Error });
    }
  });

  let offset = 0;
  const pump = (): void => {
    while (!finished && offset < data.length) {
      const end = Math.min(offset + options.chunkBytes, data.length);
      const more = call.write(encodeSnapshotData(offset, data.subarray(offset, end)));
      offset = end;
      if (!more) {
        call.once('drain', pump);
        return;
      }
    }
    if (!finished) call.end();
  };

  // The header goes first and alone, so the receiver can refuse before any data is sent.
  if (call.write(encodeSnapshotHeader(gm))) pump();
  else call.once('drain', pump);

  return {
    cancel: () => {
      if (!finished) call.cancel();
    },
  };
}
