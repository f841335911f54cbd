/**
 * Test tool: damages one Raft log record of a stopped node's LevelDB (the last record of the
 * last data group found), so the integration test can check that the node refuses to start
 * and says which group and index are bad. Usage: corrupt-store.ts <data-dir>
 */
import { ClassicLevel } from 'classic-level';
import { decodeKey } from '../../src/storage/keys.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: corrupt-store.ts <data-dir>');
const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, {
  keyEncoding: 'view',
  valueEncoding: 'view',
});
await db.open();
let target: Uint8Array | undefined;
let described = '';
for await (const key of db.keys()) {
  const k = decodeKey(key);
  if (k?.kind === 'log' && k.groupId > 0) {
    target = key;
    described = `group ${k.groupId} index ${k.first}`;
  }
}
if (!target) throw new Error('no log entry found to corrupt');
await db.put(target, new Uint8Array([0xff, 0x00, 0x13, 0x37]), { sync: true });
await db.close();
console.log(`corrupted ${described}`);
