// Conformance of chaos/proxy with Toxiproxy, driven through toxiproxy-node-client (the client the
// chaos suite uses) plus raw fetch for what the client hides (status codes, error bodies, the
// toxic listing, PATCH). Against our server by default (started in its own process); with
// TOXIPROXY_URL set, the same file runs against a real Toxiproxy, which must reach this process's
// loopback (docker compose --profile chaos runs it with host networking). The /reset test resets
// every proxy of that Toxiproxy: run this file alone against it (npx tap --jobs 1 …).
//
// The data-plane tests push real bytes through real proxies to an echo server in this process and
// assert what a client would see: bytes delayed, held, cut at a count, paced, sliced, connections
// reset, refused or closed. Timing bounds are lower bounds with generous upper bounds, so a
// loaded machine cannot fail them.
import t from 'tap';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Toxiproxy, ToxiproxyError, type Proxy } from 'toxiproxy-node-client';
import { openToxiproxy, type ToxiproxyEndpoint } from '../../chaos/proxy/launch.js';

let endpoint: ToxiproxyEndpoint;
let toxiproxy: Toxiproxy;
let echo: Server;
let echoAddress: string;
const isExternal = (): boolean => endpoint.process === undefined;

t.before(async () => {
  endpoint = await openToxiproxy();
  toxiproxy = new Toxiproxy(endpoint.url);
  echo = createServer((s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoAddress = `127.0.0.1:${(echo.address() as AddressInfo).port}`;
});

t.teardown(async () => {
  // Leave an external Toxiproxy as we found it: delete what this file created.
  const all = await toxiproxy.getAll().catch(() => ({}));
  for (const p of Object.values(all)) if (p.name.startsWith('conf_')) await p.remove();
  echo.close();
  await endpoint.close();
});

let nameCount = 0;
const uniqueName = (what: string): string => `conf_${what}_${process.pid}_${++nameCount}`;

async function echoProxy(what: string): Promise<Proxy> {
  return toxiproxy.createProxy({
    name: uniqueName(what),
    listen: '127.0.0.1:0',
    upstream: echoAddress,
  });
}

interface Raw {
  status: number;
  contentType: string | null;
  text: string;
  json(): unknown;
}

async function raw(method: string, path: string, body?: unknown): Promise<Raw> {
  const res = await fetch(`${endpoint.url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    text,
    json: () => JSON.parse(text) as unknown,
  };
}

function portOf(listen: string): number {
  return Number(listen.slice(listen.lastIndexOf(':') + 1));
}

/** A client connection through a proxy that records what comes back and how it ends. */
class Probe {
  readonly chunks: Buffer[] = [];
  error: (Error & { code?: string }) | undefined;
  isClosed = false;
  readonly closed: Promise<void>;
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.chunks.push(d);
      this.wake();
    });
    socket.on('error', (err) => (this.error = err));
    this.closed = new Promise((resolve) =>
      socket.once('close', () => {
        this.isClosed = true;
        this.wake();
        resolve();
      }),
    );
  }

  static open(listen: string): Promise<Probe> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: portOf(listen) });
      socket.once('connect', () => resolve(new Probe(socket)));
      socket.once('error', reject);
    });
  }

  get receivedBytes(): number {
    return this.chunks.reduce((n, c) => n + c.length, 0);
  }

  /** Resolves when `n` bytes arrived; rejects if the connection closes first or time runs out. */
  async waitBytes(n: number, timeoutMs = 15_000): Promise<void> {
    await this.until(() => this.receivedBytes >= n, timeoutMs, `${n} bytes`);
  }

  async waitClosed(timeoutMs = 15_000): Promise<void> {
    await this.until(() => this.isClosed, timeoutMs, 'close');
  }

  /** True if nothing arrived and the connection stayed open for `ms`. */
  async staysSilent(ms: number): Promise<boolean> {
    const before = this.receivedBytes;
    await sleep(ms);
    return this.receivedBytes === before && !this.isClosed;
  }

  private async until(ok: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ok()) {
      if (this.isClosed && what !== 'close') {
        throw new Error(`closed after ${this.receivedBytes} bytes while waiting for ${what}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what} (${this.receivedBytes} bytes)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function connectError(listen: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port: portOf(listen) });
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', (err: Error & { code?: string }) => resolve(err.code ?? err.message));
  });
}

/** Round trip of `bytes` through the echo proxy, in ms. */
async function roundTripMs(probe: Probe, bytes = 10): Promise<number> {
  const start = performance.now();
  const before = probe.receivedBytes;
  probe.socket.write(Buffer.alloc(bytes, 1));
  await probe.waitBytes(before + bytes);
  return performance.now() - start;
}

function statusOf(err: unknown): number | undefined {
  const m = /status code (\d+)/.exec(err instanceof Error ? err.message : '');
  return m ? Number(m[1]) : undefined;
}

t.test('version', async (t) => {
  const text = await toxiproxy.getVersion();
  const parsed = JSON.parse(text) as { version: string };
  t.match(parsed.version, /^(\d+\.\d+\.\d+|git)/, 'a JSON object with the version');
  const r = await raw('GET', '/version');
  t.equal(r.status, 200);
  t.match(r.contentType, /^application\/json/);
});

t.test('proxies: create, get, list, conflict, not found, delete', async (t) => {
  const name = uniqueName('crud');
  const created = await raw('POST', '/proxies', {
    name,
    listen: '127.0.0.1:0',
    upstream: echoAddress,
  });
  t.equal(created.status, 201, 'create answers 201');
  const body = created.json() as Record<string, unknown>;
  t.same(Object.keys(body), ['name', 'listen', 'upstream', 'enabled', 'toxics']);
  t.equal(body['enabled'], true, 'enabled by default');
  t.same(body['toxics'], []);
  t.ok(portOf(body['listen'] as string) > 0, 'port 0 comes back as the bound port');

  const got = await toxiproxy.get(name);
  t.equal(got.listen, body['listen']);
  t.equal(got.upstream, echoAddress);
  const all = await toxiproxy.getAll();
  t.equal(all[name]?.listen, body['listen'], 'listed by name');

  const conflict = await toxiproxy
    .createProxy({ name, listen: '127.0.0.1:0', upstream: echoAddress })
    .catch((e: unknown) => e);
  t.ok(conflict instanceof ToxiproxyError, 'the client rejects a duplicate name');
  t.equal(statusOf(conflict), 409);
  const dup = await raw('POST', '/proxies', { name, listen: '127.0.0.1:0', upstream: echoAddress });
  t.equal(dup.status, 409);
  t.same(dup.json(), { error: 'proxy already exists', status: 409 });
  t.match(dup.contentType, /^text\/plain/, 'errors are sent like Go http.Error');

  const missing = await raw('POST', '/proxies', { name: uniqueName('x'), listen: '127.0.0.1:0' });
  t.equal(missing.status, 400);
  t.same(missing.json(), { error: 'missing required field: upstream', status: 400 });
  const badJson = await raw('POST', '/proxies', '{"name":');
  t.equal(badJson.status, 400);
  t.match((badJson.json() as { error: string }).error, /^bad request body: /);

  const unknown = await raw('GET', '/proxies/conf_no_such_proxy');
  t.equal(unknown.status, 404);
  t.same(unknown.json(), { error: 'proxy not found', status: 404 });
  t.equal((await raw('PUT', `/proxies/${name}`)).status, 405, 'wrong verb: 405');
  t.equal((await raw('GET', '/no/such/route')).status, 404, 'unknown route: 404');

  const deleted = await raw('DELETE', `/proxies/${name}`);
  t.equal(deleted.status, 204);
  t.equal(deleted.text, '');
  const err = await toxiproxy.get(name).catch((e: unknown) => e);
  t.equal(statusOf(err), 404, 'gone after delete');
  t.equal(await connectError(body['listen'] as string), 'ECONNREFUSED', 'its port is closed');
});

t.test('populate: creates, keeps unchanged proxies, validates first', async (t) => {
  const a = uniqueName('pop');
  const b = uniqueName('pop');
  const first = await toxiproxy.populate([
    { name: a, listen: '127.0.0.1:0', upstream: echoAddress },
    { name: b, listen: '127.0.0.1:0', upstream: echoAddress, enabled: false },
  ]);
  t.same(Object.keys(first).sort(), [a, b].sort());
  t.equal(first[b]?.enabled, false);
  const listenA = first[a]!.listen;
  await first[a]!.addToxic({ type: 'latency', attributes: { latency: 1, jitter: 0 } } as never);

  // The same listen and upstream again: kept as it is, toxics included.
  const again = await raw('POST', '/populate', [
    { name: a, listen: listenA, upstream: echoAddress },
  ]);
  t.equal(again.status, 201);
  const proxies = (again.json() as { proxies: { listen: string; toxics: unknown[] }[] }).proxies;
  t.equal(proxies[0]?.listen, listenA);
  t.equal(proxies[0]?.toxics.length, 1, 'an unchanged proxy keeps its toxics');

  const empty = await raw('POST', '/populate', []);
  t.equal(empty.status, 201);
  t.same(empty.json(), { proxies: null });

  const c = uniqueName('pop');
  const invalid = await raw('POST', '/populate', [
    { name: c, listen: '127.0.0.1:0', upstream: echoAddress },
    { listen: '127.0.0.1:0', upstream: echoAddress },
  ]);
  t.equal(invalid.status, 400);
  t.match(invalid.json(), { error: 'missing required field: name at proxy 2', status: 400 });
  t.equal(statusOf(await toxiproxy.get(c).catch((e: unknown) => e)), 404, 'nothing created');
});

t.test('toxics: create with defaults, get, list, partial update, conflicts, delete', async (t) => {
  const proxy = await echoProxy('toxics');
  const path = `/proxies/${proxy.name}/toxics`;
  const created = await raw('POST', path, {
    type: 'latency',
    attributes: { latency: 100, jitter: 10 },
  });
  t.equal(created.status, 200, 'toxic create answers 200, not 201');
  t.same(created.json(), {
    name: 'latency_downstream',
    type: 'latency',
    stream: 'downstream',
    toxicity: 1,
    attributes: { latency: 100, jitter: 10 },
  });
  const toxic = await proxy.getToxic<{ latency: number; jitter: number }>('latency_downstream');
  t.equal(toxic.attributes.latency, 100);

  const updated = await toxic.update({ attributes: { latency: 5 } } as never);
  t.same(updated.attributes, { latency: 5, jitter: 10 }, 'attributes merge, jitter is kept');
  t.equal(updated.toxicity, 1, 'toxicity kept when absent');
  const patched = await raw('PATCH', `${path}/latency_downstream`, { toxicity: 0.5 });
  t.equal(patched.status, 200, 'PATCH updates too');
  t.equal((patched.json() as { toxicity: number }).toxicity, 0.5);

  await proxy.addToxic({
    name: 'up_slicer',
    type: 'slicer',
    stream: 'upstream',
    attributes: { average_size: 10, size_variation: 2, delay: 0 },
  } as never);
  const list = await raw('GET', path);
  t.equal(list.status, 200);
  t.same(
    (list.json() as { name: string }[]).map((x) => x.name),
    ['up_slicer', 'latency_downstream'],
    'upstream toxics listed first',
  );
  const proxyJson = (await raw('GET', `/proxies/${proxy.name}`)).json() as { toxics: unknown[] };
  t.equal(proxyJson.toxics.length, 2, 'the proxy shows its toxics');

  const dup = await raw('POST', path, { type: 'latency' });
  t.equal(dup.status, 409);
  t.same(dup.json(), { error: 'toxic already exists', status: 409 });
  const badType = await raw('POST', path, { type: 'down' });
  t.equal(badType.status, 400);
  t.same(badType.json(), { error: 'invalid toxic type', status: 400 });
  const badStream = await raw('POST', path, { type: 'latency', stream: 'sideways' });
  t.equal(badStream.status, 400);
  t.same(badStream.json(), {
    error: 'stream was invalid, can be either upstream or downstream',
    status: 400,
  });
  const fraction = await raw('POST', path, {
    type: 'latency',
    name: 'f',
    attributes: { latency: 1.5 },
  });
  t.equal(fraction.status, 400, 'integer attributes reject fractions');
  const onMissingProxy = await raw('POST', '/proxies/conf_nope/toxics', { type: 'latency' });
  t.equal(onMissingProxy.status, 404);

  for (const [type, attributes] of [
    ['bandwidth', { rate: 1000 }],
    ['timeout', { timeout: 0 }],
    ['reset_peer', { timeout: 0 }],
    ['limit_data', { bytes: 10 }],
    ['slow_close', { delay: 1 }],
  ] as const) {
    const x = await proxy.addToxic({ type, name: `every_${type}`, attributes } as never);
    t.equal(x.type, type, `creates a ${type} toxic`);
    await x.remove();
  }

  const del = await raw('DELETE', `${path}/latency_downstream`);
  t.equal(del.status, 204);
  const gone = await raw('GET', `${path}/latency_downstream`);
  t.equal(gone.status, 404);
  t.same(gone.json(), { error: 'toxic not found', status: 404 });
  await proxy.remove();
});

t.test('data: pass-through, then latency on each stream, on a live connection', async (t) => {
  const proxy = await echoProxy('latency');
  const probe = await Probe.open(proxy.listen);
  const baseMs = await roundTripMs(probe);
  t.ok(baseMs < 2000, `echo through the proxy (${baseMs.toFixed(1)} ms)`);

  const down = await proxy.addToxic({
    type: 'latency',
    attributes: { latency: 300, jitter: 0 },
  } as never);
  const downMs = await roundTripMs(probe);
  t.ok(downMs >= 280, `downstream latency 300 ms on the live connection: ${downMs.toFixed(0)} ms`);
  t.ok(downMs < 10_000);

  await proxy.addToxic({
    type: 'latency',
    stream: 'upstream',
    attributes: { latency: 200, jitter: 50 },
  } as never);
  const bothMs = await roundTripMs(probe);
  t.ok(bothMs >= 430, `both streams delayed (300 + 200 ± 50): ${bothMs.toFixed(0)} ms`);

  await down.remove();
  await (await proxy.getToxic('latency_upstream')).remove();
  const afterMs = await roundTripMs(probe);
  t.ok(afterMs < downMs, `removed toxics stop delaying (${afterMs.toFixed(0)} ms)`);

  await proxy.addToxic({
    type: 'latency',
    toxicity: 0,
    attributes: { latency: 3000, jitter: 0 },
  } as never);
  const fresh = await Probe.open(proxy.listen);
  const noEffectMs = await roundTripMs(fresh);
  t.ok(noEffectMs < 2500, `toxicity 0 leaves the connection alone (${noEffectMs.toFixed(0)} ms)`);
  probe.socket.destroy();
  fresh.socket.destroy();
  await proxy.remove();
});

t.test('data: timeout 0 holds everything; removing it closes the connection', async (t) => {
  const proxy = await echoProxy('timeout0');
  const probe = await Probe.open(proxy.listen);
  await roundTripMs(probe);
  const toxic = await proxy.addToxic({ type: 'timeout', attributes: { timeout: 0 } } as never);
  probe.socket.write('are you there?');
  t.ok(await probe.staysSilent(800), 'no bytes come back and the connection stays open');
  await toxic.remove();
  await probe.waitClosed();
  t.pass('removing the timeout toxic closed the connection it held');
  await proxy.remove();
});

t.test('data: timeout T closes after T ms of silence', async (t) => {
  const proxy = await echoProxy('timeoutT');
  await proxy.addToxic({
    type: 'timeout',
    stream: 'upstream',
    attributes: { timeout: 400 },
  } as never);
  const start = performance.now();
  const probe = await Probe.open(proxy.listen);
  probe.socket.write('dropped');
  await probe.waitClosed();
  const ms = performance.now() - start;
  t.ok(ms >= 350, `closed after ${ms.toFixed(0)} ms (timeout 400)`);
  t.equal(probe.receivedBytes, 0, 'the upstream never saw the bytes');
  await proxy.remove();
});

t.test('data: reset_peer resets the connection', async (t) => {
  const proxy = await echoProxy('reset');
  await proxy.addToxic({
    type: 'reset_peer',
    stream: 'upstream',
    attributes: { timeout: 100 },
  } as never);
  const probe = await Probe.open(proxy.listen);
  probe.socket.write('hello');
  await probe.waitClosed();
  t.equal(probe.error?.code, 'ECONNRESET', 'the client sees connection reset by peer');
  t.equal(probe.receivedBytes, 0);
  await proxy.remove();
});

t.test('data: limit_data closes after N bytes', async (t) => {
  const proxy = await echoProxy('limit');
  await proxy.addToxic({ type: 'limit_data', attributes: { bytes: 1000 } } as never);
  const probe = await Probe.open(proxy.listen);
  probe.socket.write(Buffer.alloc(5000, 7));
  await probe.waitClosed();
  t.equal(probe.receivedBytes, 1000, 'exactly the limit came back, then the connection closed');
  await proxy.remove();
});

t.test('data: bandwidth slows a large transfer', async (t) => {
  const proxy = await echoProxy('bandwidth');
  await proxy.addToxic({ type: 'bandwidth', attributes: { rate: 100 } } as never);
  const probe = await Probe.open(proxy.listen);
  const bytes = 150_000;
  const start = performance.now();
  probe.socket.write(Buffer.alloc(bytes, 3));
  await probe.waitBytes(bytes, 30_000);
  const ms = performance.now() - start;
  t.ok(ms >= 1200, `150 kB at 100 KB/s took ${ms.toFixed(0)} ms (expected about 1500)`);
  t.equal(probe.receivedBytes, bytes, 'every byte arrived');
  probe.socket.destroy();
  await proxy.remove();
});

t.test('data: slicer delivers all bytes in pieces', async (t) => {
  const proxy = await echoProxy('slicer');
  await proxy.addToxic({
    type: 'slicer',
    attributes: { average_size: 100, size_variation: 20, delay: 2000 },
  } as never);
  const probe = await Probe.open(proxy.listen);
  const payload = Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 251));
  probe.socket.write(payload);
  await probe.waitBytes(payload.length);
  t.same(Buffer.concat(probe.chunks), payload, 'every byte, in order');
  t.ok(probe.chunks.length >= 5, `arrived in ${probe.chunks.length} reads`);
  t.ok(Math.max(...probe.chunks.map((c) => c.length)) < payload.length, 'never in one piece');
  probe.socket.destroy();
  await proxy.remove();
});

t.test('enable and disable: refuse and close, then listen again on the same address', async (t) => {
  const proxy = await echoProxy('disable');
  const probe = await Probe.open(proxy.listen);
  await roundTripMs(probe);
  const disabled = await proxy.update({ enabled: false } as never);
  t.equal(disabled.enabled, false);
  await probe.waitClosed();
  t.pass('the live connection was closed');
  t.equal(await connectError(proxy.listen), 'ECONNREFUSED', 'new connections are refused');
  const enabled = await disabled.update({ enabled: true } as never);
  t.equal(enabled.listen, proxy.listen, 'same listen address');
  const again = await Probe.open(enabled.listen);
  await roundTripMs(again);
  t.pass('connections work again');
  again.socket.destroy();

  // A new upstream that does not resolve is accepted: it is dialled per connection, not now.
  const moved = await enabled.update({ enabled: false, upstream: 'somehost:12345' } as never);
  t.equal(moved.upstream, 'somehost:12345');
  await moved.remove();
});

t.test('reset: removes every toxic and enables every proxy', async (t) => {
  if (isExternal()) t.comment('resets every proxy of the external Toxiproxy');
  const proxy = await echoProxy('reset_all');
  await proxy.addToxic({ type: 'latency', attributes: { latency: 2000, jitter: 0 } } as never);
  await proxy.update({ enabled: false } as never);
  const r = await raw('POST', '/reset');
  t.equal(r.status, 204);
  const after = (await raw('GET', `/proxies/${proxy.name}`)).json() as {
    enabled: boolean;
    toxics: unknown[];
  };
  t.equal(after.enabled, true);
  t.same(after.toxics, []);
  const probe = await Probe.open(proxy.listen);
  const ms = await roundTripMs(probe);
  t.ok(ms < 1800, `no latency left (${ms.toFixed(0)} ms)`);
  probe.socket.destroy();
  await proxy.remove();
});
