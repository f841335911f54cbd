// A `tickraft serve` that cannot start exits: with its client API, peer, metrics or debug
// (DebugService, --debug-listen) port taken, its LevelDB lock held by another process, or a data
// directory it cannot create, the process exits 1 within a few seconds naming the reason, never
// leads a group, and leaves nothing held: afterwards every one of its ports binds and its LevelDB
// opens. Then the same node starts fine. Real processes, each cluster on its own random loopback address.
import t, { type Test } from 'tap';
import { ClassicLevel } from 'classic-level';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { ProcCluster, type ProcNode } from '../helpers/cluster.js';

/** From spawn to exit: the process's own start (tsx compiling on a loaded machine) included. */
const EXIT_BOUND_MS = 20_000;

function listen(host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, host, () => resolve(srv));
  });
}

function close(srv: Server): Promise<void> {
  return new Promise((resolve) => srv.close(() => resolve()));
}

/** Starts the node and waits for its exit, bounded; the time from spawn to exit in ms. */
async function startExpectingExit(
  node: ProcNode,
  extraArgs: string[] = [],
): Promise<{ code: number | null; ms: number }> {
  const t0 = Date.now();
  node.start(extraArgs);
  const bound = new Promise<'running'>((resolve) =>
    setTimeout(() => resolve('running'), EXIT_BOUND_MS).unref(),
  );
  const outcome = await Promise.race([node.exit!, bound]);
  if (outcome === 'running') {
    await node.kill9();
    return { code: null, ms: Date.now() - t0 };
  }
  return { code: outcome.code, ms: Date.now() - t0 };
}

/** Every port of the node binds and its LevelDB opens: the exited node holds nothing. */
async function assertReleased(t: Test, node: ProcNode, ports: number[]): Promise<void> {
  for (const port of ports) {
    const srv = await listen(node.host, port).catch((err: unknown) => err);
    t.ok(!(srv instanceof Error), `port ${port} is free again`, { err: String(srv) });
    if (!(srv instanceof Error)) await close(srv as Server);
  }
  const db = new ClassicLevel(node.dataDir);
  const opened = await db.open().then(
    () => true,
    (err: unknown) => err,
  );
  t.equal(opened, true, 'its LevelDB opens (the lock was released)');
  await db.close();
}

t.test('a node that cannot start exits and releases everything it opened', async (t) => {
  const cluster = await ProcCluster.create({ nodes: 1, metrics: true });
  t.teardown(() => cluster.cleanup());
  const node = cluster.nodes[0]!;
  const ports = {
    api: node.apiPort,
    peer: node.peerPort,
    metrics: node.metricsPort!,
    debug: node.debugPort,
  };

  for (const [name, port] of Object.entries(ports)) {
    await t.test(`its ${name} port taken`, async (t) => {
      const holder = await listen(node.host, port);
      const { code, ms } = await startExpectingExit(node);
      await close(holder);
      t.equal(code, 1, `exits 1 (after ${ms} ms)`, { stderr: node.stderr.slice(-800) });
      t.match(node.stderr, /tickraft: cannot start: .*EADDRINUSE/, 'says why');
      t.notMatch(node.stdout, /leader changed/, 'never led a group');
      await assertReleased(t, node, Object.values(ports));
    });
  }

  await t.test('its LevelDB lock held by another process', async (t) => {
    const db = new ClassicLevel(node.dataDir);
    await db.open();
    const { code, ms } = await startExpectingExit(node);
    await db.close();
    t.equal(code, 1, `exits 1 (after ${ms} ms)`, { stderr: node.stderr.slice(-800) });
    t.match(node.stderr, /tickraft: cannot start: STORAGE_IO: .*LOCK/, 'says why');
    await assertReleased(t, node, Object.values(ports));
  });

  await t.test('a data directory it cannot create', async (t) => {
    const file = join(cluster.root, 'a-file');
    writeFileSync(file, '');
    // A later --data-dir flag wins over the cluster's own.
    const { code, ms } = await startExpectingExit(node, ['--data-dir', join(file, 'data')]);
    t.equal(code, 1, `exits 1 (after ${ms} ms)`, { stderr: node.stderr.slice(-800) });
    t.match(node.stderr, /tickraft: cannot start: STORAGE_IO: .*a-file/, 'names the directory');
    await assertReleased(t, node, Object.values(ports));
  });

  await t.test('with nothing in its way, the same node starts', async (t) => {
    node.start();
    const [st] = await cluster.waitReady(60_000);
    t.equal(st?.metaInitialized, true);
    t.equal((await node.term()).code, 0, 'and stops cleanly');
  });
});
