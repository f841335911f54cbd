/**
 * `npx tsx bench/transport.ts`: figures for the gRPC peer transport, printed with the machine's
 * context and never asserted. Two PeerTransports on 127.0.0.1 in this one process (so sender,
 * receiver and both gRPC stacks share one JS thread; a real pair of nodes has a thread each).
 * (1) App messages of 64 entries × 100 B, sent as fast as a bounded window of unacknowledged
 * messages allows: messages/s, entries/s and payload MB/s. (2) Heartbeats of 1,000 groups sent
 * once per round and coalesced into one frame per round: heartbeats/s and bytes per round.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { message, type Entry } from '../src/raft/messages.js';
import { PeerTransport, type GroupMessage } from '../src/transport/peer-transport.js';

const DURATION_MS = Number(process.env['BENCH_MS'] ?? 3000);

interface Pair {
  a: PeerTransport;
  b: PeerTransport;
  received: { frames: number; messages: number };
}

async function startPair(): Promise<Pair> {
  const received = { frames: 0, messages: 0 };
  const common = { listen: '127.0.0.1:0', isGroupHosted: () => true } as const;
  const a = new PeerTransport({ ...common, nodeId: 'a', onMessages: () => undefined });
  const b = new PeerTransport({
    ...common,
    nodeId: 'b',
    onMessages: (_from, msgs) => {
      received.frames++;
      received.messages += msgs.length;
    },
  });
  await a.start();
  const { port } = await b.start();
  a.setPeer('b', `127.0.0.1:${port}`);
  return { a, b, received };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function benchApps(pair: Pair): Promise<void> {
  const entries: Entry[] = Array.from({ length: 64 }, (_, i) => ({
    term: 1,
    index: i + 1,
    type: 'normal',
    data: new Uint8Array(100).fill(i),
  }));
  const app = (i: number): GroupMessage => ({
    groupId: i % 1000,
    message: message({ type: 'app', from: 'a', to: 'b', term: 1, index: i, commit: i, entries }),
  });
  // Unacknowledged messages allowed, like Raft's in-flight window summed over groups.
  const windowMsgs = 512;
  let sent = 0;
  const run = async (ms: number): Promise<{ msgs: number; ms: number }> => {
    const startReceived = pair.received.messages;
    const start = performance.now();
    while (performance.now() - start < ms) {
      const batch: GroupMessage[] = [];
      while (sent - pair.received.messages < windowMsgs) batch.push(app(sent++));
      if (batch.length > 0) pair.a.send('b', batch);
      await turn();
    }
    return { msgs: pair.received.messages - startReceived, ms: performance.now() - start };
  };
  await run(500); // warm-up: JIT, HTTP/2 windows
  const framesBefore = pair.received.frames;
  const { msgs, ms } = await run(DURATION_MS);
  const perSec = (msgs / ms) * 1000;
  const frames = pair.received.frames - framesBefore;
  console.log(
    `app 64×100 B: ${Math.round(perSec).toLocaleString('en')} msgs/s, ` +
      `${Math.round(perSec * 64).toLocaleString('en')} entries/s, ` +
      `${((perSec * 64 * 100) / 1e6).toFixed(1)} MB/s payload, ` +
      `${(msgs / Math.max(1, frames)).toFixed(0)} msgs/frame, ` +
      `dropped ${pair.a.peerCounters('b').droppedMessageCount}`,
  );
}

async function benchHeartbeats(pair: Pair): Promise<void> {
  const groups = 1000;
  const round: GroupMessage[] = Array.from({ length: groups }, (_, g) => ({
    groupId: g,
    message: message({
      type: 'heartbeat',
      from: 'a',
      to: 'b',
      term: 3,
      commit: 100 + g,
      context: 7,
    }),
  }));
  const windowRounds = 4;
  let rounds = 0;
  const run = async (ms: number): Promise<{ beats: number; frames: number; ms: number }> => {
    const startMessages = pair.received.messages;
    const startFrames = pair.received.frames;
    const start = performance.now();
    while (performance.now() - start < ms) {
      // One send per group, as the runtime would do it, all in one turn.
      while (rounds - pair.received.frames < windowRounds) {
        for (const hb of round) pair.a.send('b', [hb]);
        rounds++;
        await turn();
      }
      await turn();
    }
    return {
      beats: pair.received.messages - startMessages,
      frames: pair.received.frames - startFrames,
      ms: performance.now() - start,
    };
  };
  pair.received.frames = 0;
  pair.received.messages = 0;
  await run(500);
  const bytesBefore = pair.b.peerCounters('a').receivedBytes;
  const { beats, frames, ms } = await run(DURATION_MS);
  const bytes = pair.b.peerCounters('a').receivedBytes - bytesBefore;
  console.log(
    `heartbeats, 1,000 groups coalesced: ${Math.round((beats / ms) * 1000).toLocaleString('en')} ` +
      `heartbeats/s, ${Math.round((frames / ms) * 1000).toLocaleString('en')} frames/s, ` +
      `${Math.round(bytes / Math.max(1, frames)).toLocaleString('en')} bytes/frame, ` +
      `${(beats / Math.max(1, frames)).toFixed(0)} heartbeats/frame`,
  );
}

function version(pkg: string): string {
  const url = new URL(`../node_modules/${pkg}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

const cpu = os.cpus()[0];
console.log(
  `machine: ${os.cpus().length} × ${cpu?.model ?? 'unknown cpu'}, ` +
    `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, ` +
    `@grpc/grpc-js ${version('@grpc/grpc-js')}, @grpc/proto-loader ${version('@grpc/proto-loader')}`,
);
console.log(
  `network: loopback, both transports in one process (one JS thread); ${DURATION_MS} ms per case`,
);
const appPair = await startPair();
await benchApps(appPair);
await Promise.all([appPair.a.close(), appPair.b.close()]);
const hbPair = await startPair();
await benchHeartbeats(hbPair);
await Promise.all([hbPair.a.close(), hbPair.b.close()]);
