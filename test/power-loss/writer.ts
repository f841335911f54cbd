/**
 * Child process of test/integration/power-loss.test.ts: opens the node store in argv[2] and
 * performs the workload of seed argv[3] (workload.ts) through the store's own API, printing
 * `ack <n>` once op n's promise has resolved, the moment a node would send the messages or
 * answer the client that depend on it. Runs until killed (it waits once the ops run out). The
 * test runs it with the unsynced-shim preloaded and kills it with SIGKILL.
 *
 * stdout is a pipe, and writes to a pipe are synchronous on Linux: a line printed before the
 * kill is in the pipe when the child dies, and the test reads it.
 */
import { NodeStore } from '../../src/storage/node-store.js';
import { Workload, performOp } from './workload.js';

/** Ops performed at most; the test kills the child long before. */
const OPS_MAX = 5000;

async function main(dir: string, seed: number): Promise<void> {
  let store = await NodeStore.open(dir);
  process.stdout.write('open\n');
  const workload = new Workload(seed);
  for (let n = 1; n <= OPS_MAX; n++) {
    store = await performOp(store, workload.next(), dir);
    process.stdout.write(`ack ${n}\n`);
  }
  process.stdout.write('done\n');
  // Stay alive until killed: the test's kill is what ends every run.
  setInterval(() => {}, 60_000);
}

const dir = process.argv[2];
const seed = Number(process.argv[3]);
if (dir === undefined || !Number.isSafeInteger(seed))
  throw new Error('usage: writer.ts <dir> <seed>');
await main(dir, seed);
