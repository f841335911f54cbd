/**
 * All proxies by name, and the collection-level operations of the API: create, populate
 * (create or replace many, idempotent), delete and reset. Mutations run one at a time, so two
 * requests never interleave a stop and a start of the same proxy.
 */
import { badRequest, PROXY_EXISTS, ProxyApiError, proxyNotFound } from './errors.js';
import { normalizeAddress } from './address.js';
import { asBody, optionalBoolean, optionalString, Proxy, type ProxyJson } from './proxy.js';

interface ProxyInput {
  readonly name: string;
  readonly listen: string;
  readonly upstream: string;
  readonly enabled: boolean;
}

/** The error of a populate call, with the proxies it did create or keep before failing. */
export class PopulateError extends ProxyApiError {
  constructor(
    readonly original: ProxyApiError,
    readonly proxies: ProxyJson[],
  ) {
    super(original.code, original.message, { cause: original });
  }
}

export class ProxyRegistry {
  private readonly proxies = new Map<string, Proxy>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly random: () => number) {}

  /** Runs `fn` after every mutation queued before it. */
  serialize<T>(fn: () => Promise<T> | T): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  list(): Record<string, ProxyJson> {
    const out: Record<string, ProxyJson> = {};
    for (const [name, p] of this.proxies) out[name] = p.toJSON();
    return out;
  }

  get(name: string): Proxy {
    const p = this.proxies.get(name);
    if (p === undefined) throw proxyNotFound();
    return p;
  }

  async create(body: unknown): Promise<Proxy> {
    const input = parseProxyInput(body, '');
    if (this.proxies.has(input.name)) throw new ProxyApiError(PROXY_EXISTS, 'proxy already exists');
    return this.add(input);
  }

  /**
   * Every entry is checked before anything changes. A proxy of the same name whose listen and
   * upstream are unchanged is kept as it is (toxics, enabled state); otherwise it is replaced.
   * Proxies not listed are left alone.
   */
  async populate(body: unknown): Promise<ProxyJson[]> {
    if (!Array.isArray(body)) throw badRequest('bad request body: the body must be a JSON array');
    const inputs = body.map((entry, i) => parseProxyInput(entry, ` at proxy ${i + 1}`));
    const done: ProxyJson[] = [];
    for (const input of inputs) {
      try {
        const existing = this.proxies.get(input.name);
        if (
          existing &&
          normalizeAddress(existing.listen) === normalizeAddress(input.listen) &&
          existing.upstream === input.upstream
        ) {
          done.push(existing.toJSON());
          continue;
        }
        if (existing) {
          this.proxies.delete(input.name);
          await existing.stop();
        }
        done.push((await this.add(input)).toJSON());
      } catch (err) {
        if (err instanceof ProxyApiError) throw new PopulateError(err, done);
        throw err;
      }
    }
    return done;
  }

  async remove(name: string): Promise<void> {
    const p = this.get(name);
    this.proxies.delete(name);
    p.removeAllToxics();
    await p.stop();
  }

  /** Every toxic removed (with its effects on live connections) and every proxy enabled. */
  async reset(): Promise<void> {
    for (const p of this.proxies.values()) {
      p.removeAllToxics();
      await p.start();
    }
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.proxies.values()].map((p) => p.stop()));
    this.proxies.clear();
  }

  private async add(input: ProxyInput): Promise<Proxy> {
    const proxy = new Proxy(input, this.random);
    // A failed bind leaves no proxy behind.
    if (input.enabled) await proxy.start();
    this.proxies.set(input.name, proxy);
    return proxy;
  }
}

function parseProxyInput(body: unknown, where: string): ProxyInput {
  const b = asBody(body);
  const name = optionalString(b, 'name') ?? '';
  if (name === '') throw badRequest(`missing required field: name${where}`);
  const upstream = optionalString(b, 'upstream') ?? '';
  if (upstream === '') throw badRequest(`missing required field: upstream${where}`);
  return {
    name,
    // Go would listen on every interface for an empty address; this server binds loopback only.
    listen: optionalString(b, 'listen') || '127.0.0.1:0',
    upstream,
    enabled: optionalBoolean(b, 'enabled') ?? true,
  };
}
