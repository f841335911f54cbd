/**
 * Child process of durability.test.ts: opens the store in argv[2] and group-commits forever,
 * printing `ack <lastIndex>` after each commit promise resolves. The test kills it with SIGKILL
 * at a random moment and then checks that every acknowledged index is on disk. On start it
 * continues from whatever the previous (killed) run left, so several kills hit one database.
 * Every few batches it also compacts with saveSnapshot, so crashes land on those writes too.
 */
import { NodeStore } from '../../../src/storage/node-store.js';
import { CRASH_ENTRY_BYTES, CRASH_GROUPS, ents, hs } from './helpers.js';

async function main(dir: string): Promise<void> {
  const store = await NodeStore.open(dir);
  for (const id of CRASH_GROUPS) {
    if (store.group(id) === undefined) await store.createGroup(id, undefined);
  }
  let last = store.group(CRASH_GROUPS[0]!)!.lastIndex();
  for (let batch = 0; ; batch++) {
    const count = 1 + (batch % 17);
    const lo = last + 1;
    last += count;
    await store.commit(
      CRASH_GROUPS.map((groupId) => ({
        groupId,
        entries: ents(lo, last, 1, CRASH_ENTRY_BYTES),
        hardState: hs(1, last),
      })),
    );
    process.stdout.write(`ack ${last}\n`);
    if (batch % 25 === 24) {
      const at = last - 5;
      for (const groupId of CRASH_GROUPS) {
        await store.saveSnapshot(groupId, {
          meta: { index: at, term: 1, confState: store.group(groupId)!.initialState().confState },
          data: new Uint8Array((1 << 20) + 4096 + at).fill(at & 0xff),
        });
      }
      process.stdout.write(`snap ${at}\n`);
    }
  }
}

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: crash-writer.ts <dir>');
await main(dir);
