// The test-only key-value state machine behind DebugService. Goal: a put command round-trips
// exactly (any UTF-8, empty and long keys and values), commands written by earlier builds
// (msgpack maps) still apply, and a damaged command is refused rather than half-applied.
import { pack } from 'msgpackr';
import t from 'tap';
import {
  KV_PUT_TAG,
  KvStateMachine,
  decodeKvPut,
  encodeKvPut,
} from '../../../src/server/kv-state-machine.js';

const entry = (data: Uint8Array) => ({ term: 1, index: 1, type: 'normal' as const, data });

t.test('put commands round-trip', (t) => {
  const strings = ['', 'a', 'key-42', 'ñ€😀', 'x'.repeat(127), 'y'.repeat(128), 'z'.repeat(70_000)];
  for (const k of strings) {
    for (const v of strings) {
      const bytes = encodeKvPut({ k, v });
      t.equal(bytes[0], KV_PUT_TAG);
      // As the Raft log hands it over: a plain Uint8Array view at an offset.
      const view = new Uint8Array(bytes.length + 3);
      view.set(bytes, 3);
      const back = decodeKvPut(view.subarray(3));
      if (back.k !== k || back.v !== v) t.fail(`${k.length}/${v.length} chars`);
    }
  }
  t.pass('every pair round-trips');
  t.end();
});

t.test('the state machine applies new and earlier (msgpack) commands', (t) => {
  const sm = new KvStateMachine();
  sm.apply(entry(encodeKvPut({ k: 'a', v: '1' })));
  sm.apply(entry(pack({ k: 'b', v: '2' })));
  sm.apply(entry(encodeKvPut({ k: 'b', v: '3' })));
  t.same(
    [...sm.data],
    [
      ['a', '1'],
      ['b', '3'],
    ],
  );
  t.equal(sm.applied, 3);
  const copy = new KvStateMachine();
  copy.restore(sm.snapshot());
  t.same([...copy.data], [...sm.data]);
  t.end();
});

t.test('damaged commands are refused', (t) => {
  const good = encodeKvPut({ k: 'key', v: 'value' });
  t.throws(() => decodeKvPut(good.subarray(0, 1)), /truncated key length/);
  t.throws(() => decodeKvPut(good.subarray(0, 3)), /key runs past/);
  t.throws(() => decodeKvPut(Uint8Array.of(KV_PUT_TAG, 0x80, 0x80)), /truncated key length/);
  const sm = new KvStateMachine();
  t.throws(() => sm.apply(entry(good.subarray(0, 3))));
  t.equal(sm.data.size, 0);
  t.end();
});
