/**
 * One proxy: a listening socket, its upstream address, its toxics and its live connections.
 *
 * Disabling (or deleting, or moving) a proxy closes its listener, so new connections are refused,
 * and closes every live connection; enabling binds the same listen address again (the bound
 * address, so a proxy created on port 0 comes back on the port it got). Toxics survive disable
 * and enable. Adding, updating or removing a toxic acts on live connections too.
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { formatAddress, isLoopbackHost, normalizeAddress, parseAddress } from './address.js';
import {
  badRequest,
  PROXY_LISTEN_FAILED,
  ProxyApiError,
  TOXIC_EXISTS,
  toxicNotFound,
} from './errors.js';
import { Link } from './link.js';
import {
  parseToxicCreate,
  parseToxicUpdate,
  toToxicJson,
  type Direction,
  type ToxicJson,
  type ToxicSpec,
} from './toxic.js';

export interface ProxyJson {
  name: string;
  listen: string;
  upstream: string;
  enabled: boolean;
  toxics: ToxicJson[];
}

export interface ProxyFields {
  readonly name: string;
  readonly listen: string;
  readonly upstream: string;
  readonly enabled: boolean;
}

export class Proxy {
  readonly name: string;
  listen: string;
  upstream: string;
  enabled = false;
  /** In creation order; each direction's chain is this list filtered by direction. */
  private toxics: ToxicSpec[] = [];
  private server: Server | undefined;
  private readonly links = new Set<Link>();

  constructor(
    fields: Omit<ProxyFields, 'enabled'>,
    private readonly random: () => number,
  ) {
    this.name = fields.name;
    this.listen = fields.listen;
    this.upstream = fields.upstream;
  }

  toJSON(): ProxyJson {
    return {
      name: this.name,
      listen: this.listen,
      upstream: this.upstream,
      enabled: this.enabled,
      toxics: this.listToxics(),
    };
  }

  /** Upstream toxics first, then downstream, each in chain order (Toxiproxy's listing). */
  listToxics(): ToxicJson[] {
    return (['upstream', 'downstream'] as const).flatMap((d) => this.toxicsOf(d).map(toToxicJson));
  }

  /** Binds the listen address; the bound address replaces it. Rejects with a 500 error. */
  async start(): Promise<void> {
    if (this.server !== undefined) return;
    const address = parseAddress(this.listen);
    if (typeof address === 'string') throw listenFailed(this.listen, address);
    if (!isLoopbackHost(address.host)) {
      throw listenFailed(this.listen, 'this server binds loopback addresses only');
    }
    const server = createServer({ allowHalfOpen: true }, (client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: address.host, port: address.port }, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch((err: unknown) => {
      throw listenFailed(this.listen, err instanceof Error ? err.message : String(err));
    });
    const bound = server.address() as AddressInfo;
    this.listen = formatAddress(bound.address, bound.port);
    this.server = server;
    this.enabled = true;
  }

  /** Closes the listener (new connections are refused) and every live connection. */
  async stop(): Promise<void> {
    this.enabled = false;
    const server = this.server;
    this.server = undefined;
    if (server === undefined) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const link of this.links) link.close();
    await closed;
  }

  /** Toxiproxy's Update: changed listen or upstream restarts the proxy; enabled toggles it. */
  async update(body: unknown): Promise<void> {
    const b = asBody(body);
    const listen = optionalString(b, 'listen') ?? this.listen;
    const upstream = optionalString(b, 'upstream') ?? this.upstream;
    const enabled = optionalBoolean(b, 'enabled') ?? this.enabled;
    if (normalizeAddress(listen) !== normalizeAddress(this.listen) || upstream !== this.upstream) {
      await this.stop();
      this.listen = listen;
      this.upstream = upstream;
    }
    if (enabled) await this.start();
    else await this.stop();
  }

  addToxic(body: unknown): ToxicSpec {
    const spec = parseToxicCreate(body);
    if (this.toxics.some((t) => t.name === spec.name)) {
      throw new ProxyApiError(TOXIC_EXISTS, 'toxic already exists');
    }
    this.toxics.push(spec);
    for (const link of this.links) link.addToxic(spec);
    return spec;
  }

  getToxic(name: string): ToxicSpec {
    const spec = this.toxics.find((t) => t.name === name);
    if (spec === undefined) throw toxicNotFound();
    return spec;
  }

  updateToxic(name: string, body: unknown): ToxicSpec {
    const spec = parseToxicUpdate(this.getToxic(name), body);
    this.toxics = this.toxics.map((t) => (t.name === name ? spec : t));
    for (const link of this.links) link.updateToxic(spec);
    return spec;
  }

  removeToxic(name: string): void {
    const spec = this.getToxic(name);
    this.toxics = this.toxics.filter((t) => t !== spec);
    for (const link of this.links) link.removeToxic(spec);
  }

  removeAllToxics(): void {
    for (const t of [...this.toxics]) this.removeToxic(t.name);
  }

  private toxicsOf(direction: Direction): ToxicSpec[] {
    return this.toxics.filter((t) => t.direction === direction);
  }

  private accept(client: Socket): void {
    const link = new Link(client, {
      upstream: this.upstream,
      toxicsOf: (d) => this.toxicsOf(d),
      random: this.random,
      isResetOnClose: this.toxics.some((t) => t.type === 'reset_peer'),
      onClosed: (l) => this.links.delete(l),
    });
    this.links.add(link);
  }
}

function listenFailed(listen: string, reason: string): ProxyApiError {
  return new ProxyApiError(PROXY_LISTEN_FAILED, `listen tcp ${listen}: ${reason}`);
}

type Body = Record<string, unknown>;

export function asBody(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('bad request body: the body must be a JSON object');
  }
  return body as Body;
}

export function optionalString(b: Body, field: string): string | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw badRequest(`bad request body: ${field} must be a string`);
  return v;
}

export function optionalBoolean(b: Body, field: string): boolean | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw badRequest(`bad request body: ${field} must be a boolean`);
  return v;
}
