// PeerTransport options are checked when the transport is built. Goal: every bad option is
// reported at once with its field and rule (ValidationError, TRANSPORT_INVALID_OPTIONS), the
// defaults hold together, and a transport closed before it finished starting never leaves a
// port bound. Method: a table of rejected option sets, then real binds on 127.0.0.1.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { compileOptions, DEFAULT_LIMITS } from '../../../src/transport/options.js';
import { PeerTransport, type PeerTransportOptions } from '../../../src/transport/peer-transport.js';

const base: PeerTransportOptions = {
  nodeId: 'a',
  listen: '127.0.0.1:0',
  onMessages: () => undefined,
  isGroupHosted: () => true,
};

t.test('bad options are all reported, each with its field', (t) => {
  const cases: [string, Partial<PeerTransportOptions>, string[]][] = [
    ['empty node id', { nodeId: '' }, ['nodeId']],
    ['listen without a port', { listen: 'localhost' }, ['listen']],
    ['empty peer address', { peers: new Map([['b', '']]) }, ['peers.b']],
    [
      'zero queue bound',
      { limits: { maxQueuedBytesPerPeer: 0 } },
      ['limits.maxQueuedBytesPerPeer'],
    ],
    ['fractional frame bound', { limits: { maxFrameBytes: 20_000.5 } }, ['limits.maxFrameBytes']],
    ['tiny frame bound', { limits: { maxFrameBytes: 1000 } }, ['limits.maxFrameBytes']],
    [
      'chunk above the frame bound',
      { limits: { maxFrameBytes: 65_536, snapshotChunkBytes: 65_537 } },
      ['limits.snapshotChunkBytes'],
    ],
    [
      'backoff max below min',
      { limits: { reconnectBackoffMinMs: 500, reconnectBackoffMaxMs: 100 } },
      ['limits.reconnectBackoffMaxMs'],
    ],
    [
      'several at once',
      { nodeId: '', limits: { closeTimeoutMs: -1 } },
      ['nodeId', 'limits.closeTimeoutMs'],
    ],
  ];
  for (const [what, patch, fields] of cases) {
    try {
      new PeerTransport({ ...base, ...patch });
      t.fail(`${what}: accepted`);
    } catch (err) {
      t.type(err, ValidationError, what);
      const e = err as ValidationError;
      t.equal(e.code, 'TRANSPORT_INVALID_OPTIONS', what);
      t.strictSame(
        e.violations.map((v) => v.field),
        fields,
        what,
      );
    }
  }
  t.end();
});

t.test('defaults are valid; a smaller frame bound lowers the default chunk', (t) => {
  t.strictSame(compileOptions(base), DEFAULT_LIMITS);
  const small = compileOptions({ ...base, limits: { maxFrameBytes: 65_536 } });
  t.equal(small.snapshotChunkBytes, 65_536);
  t.ok(Object.isFrozen(small));
  t.end();
});

t.test('close() during start() fails the start and frees the port', async (t) => {
  const first = new PeerTransport(base);
  const starting = first.start();
  await first.close();
  await t.rejects(starting, { code: 'TRANSPORT_CLOSED' });

  const a = new PeerTransport(base);
  t.teardown(() => a.close());
  const { port } = await a.start();
  const b = new PeerTransport({ ...base, listen: `127.0.0.1:${port}` });
  t.teardown(() => b.close());
  await t.rejects(b.start(), { code: 'TRANSPORT_BIND_FAILED' }, 'a port in use is a typed error');
  await a.close();
  const c = new PeerTransport({ ...base, listen: `127.0.0.1:${port}` });
  t.teardown(() => c.close());
  t.strictSame(await c.start(), { port }, 'the port is free again after close()');
});
