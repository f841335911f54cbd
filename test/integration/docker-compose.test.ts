// No Docker engine runs here, so this checks what can be checked without one: docker-compose.yml
// parses; every service's command runs a real bin with a real subcommand and only flags that
// command's --help lists; each node's flags compile (compileNodeOptions: addresses, ids, the
// initial cluster naming the services); nodes have distinct ids, volumes and published ports;
// every port is published on 127.0.0.1 unless TICKRAFT_BIND says otherwise; each node advertises
// (--advertise-address) the host address its API port is published on, so a client on the host
// reaches every node ClusterStatus lists; the optional fourth node joins with --join through a
// member's API address; and the Dockerfile builds on node:20-slim and copies what the commands need. Third-party images
// (the real Toxiproxy for the chaos suite) cannot be asked for --help here: they must sit behind a
// compose profile, so a plain `docker compose up` never starts them, pin a version, and use only
// flags their documentation lists.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import {
  compileNodeOptions,
  OPTION_FLAGS,
  type NodeOptions,
} from '../../src/config/node-config.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
type Obj = Record<string, unknown>;

/**
 * Compose's variable interpolation as `docker compose` does it with none of the variables set:
 * `${VAR:-default}` becomes the default. Any other `$` form would be left unresolved, so the
 * test refuses it.
 */
function interpolateDefaults(text: string): string {
  const out = text.replace(/\$\{([A-Z_][A-Z0-9_]*):-([^}$]*)\}/g, (_, _name, dflt: string) => dflt);
  const left = /\$[{A-Za-z]/.exec(out.replace(/\$\$/g, ''));
  if (left) throw new Error(`docker-compose.yml: unresolved interpolation near ${left.index}`);
  return out;
}

const composeText = readFileSync(`${ROOT}docker-compose.yml`, 'utf8');
const compose = parse(interpolateDefaults(composeText), { merge: true }) as Obj;
const allServices = compose['services'] as Record<string, Obj>;
/** The services built from this repository's Dockerfile. */
const services = Object.fromEntries(
  Object.entries(allServices).filter(([, s]) => s['image'] === 'tickraft:local'),
);

/** Third-party services: image name → the flags its server accepts (Toxiproxy's cmd/server). */
const THIRD_PARTY_FLAGS: Record<string, Set<string>> = {
  'ghcr.io/shopify/toxiproxy': new Set([
    '-host',
    '-port',
    '-config',
    '-seed',
    '-proxy-metrics',
    '-runtime-metrics',
    '-version',
  ]),
};

const helpCache = new Map<string, Set<string>>();
/** The flags `node <bin> <sub> --help` lists. */
function flagsOf(bin: string, sub: string): Set<string> {
  const key = `${bin} ${sub}`;
  let flags = helpCache.get(key);
  if (!flags) {
    const help = execFileSync(process.execPath, [`${ROOT}${bin}`, sub, '--help'], {
      encoding: 'utf8',
    });
    flags = new Set([...help.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]));
    helpCache.set(key, flags);
  }
  return flags;
}

/** `--flag value` pairs of a command (every flag these commands use takes a value). */
function pairs(args: string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) m.set(args[i]!, args[i + 1] ?? '');
  return m;
}

t.test('every service runs a real command with accepted flags', (t) => {
  t.same(Object.keys(services).sort(), ['n1', 'n2', 'n3', 'n4', 'sink']);
  for (const [name, svc] of Object.entries(services)) {
    const cmd = svc['command'] as string[];
    t.ok(Array.isArray(cmd), `${name}: command is an exec-form list`);
    t.equal(cmd[0], 'node', `${name} runs node`);
    const [bin, sub, ...args] = cmd.slice(1) as [string, string, ...string[]];
    t.ok(['bin/tickraft', 'bin/tickctl'].includes(bin), `${name}: ${bin}`);
    const accepted = flagsOf(bin, sub);
    t.ok(accepted.size > 0, `${bin} ${sub} --help lists flags`);
    t.equal(args.length % 2, 0, `${name}: flags come with values`);
    for (const flag of pairs(args).keys())
      t.ok(accepted.has(flag), `${name}: ${bin} ${sub} accepts ${flag}`);
    t.equal(svc['image'], 'tickraft:local', `${name} uses the image the Dockerfile builds`);
  }
  t.end();
});

t.test('third-party services are opt-in, pinned, and use flags they accept', (t) => {
  const others = Object.entries(allServices).filter(([name]) => !(name in services));
  t.same(
    others.map(([name]) => name),
    ['toxiproxy'],
  );
  t.same(services['n4']?.['profiles'], ['grow'], 'the fourth node starts only when asked');
  for (const [name, svc] of others) {
    const [image, tag] = (svc['image'] as string).split(':') as [string, string | undefined];
    const accepted = THIRD_PARTY_FLAGS[image];
    t.ok(accepted, `${name}: a known image (${image})`);
    t.match(tag, /^\d+\.\d+\.\d+$/, `${name}: a pinned version`);
    t.ok((svc['profiles'] as string[] | undefined)?.includes('chaos'), `${name}: profile chaos`);
    for (const arg of svc['command'] as string[]) {
      const flag = arg.split('=')[0]!;
      if (flag.startsWith('-')) t.ok(accepted?.has(flag), `${name} accepts ${flag}`);
    }
  }
  t.end();
});

/** A published port, `host_ip:host_port:container_port` (the short syntax). */
function publishedPorts(name: string, svc: Obj): { ip: string; host: number; inside: number }[] {
  return (svc['ports'] as string[]).map((p) => {
    const parts = p.split(':');
    if (parts.length !== 3) throw new Error(`${name}: port ${p} does not name a host address`);
    return { ip: parts[0]!, host: Number(parts[1]), inside: Number(parts[2]) };
  });
}

t.test('ports are published on 127.0.0.1 unless TICKRAFT_BIND says otherwise', (t) => {
  for (const [name, svc] of Object.entries(services)) {
    for (const p of publishedPorts(name, svc))
      t.equal(p.ip, '127.0.0.1', `${name}: ${p.host} is published on loopback only`);
  }
  const raw = parse(composeText) as { services: Record<string, Obj> };
  for (const [name, svc] of Object.entries(raw.services))
    for (const p of (svc['ports'] as string[] | undefined) ?? [])
      t.match(
        p,
        /^\$\{TICKRAFT_BIND:-127\.0\.0\.1\}:\d+:\d+$/,
        `${name}: ${p} follows TICKRAFT_BIND`,
      );
  t.end();
});

t.test('nodes compile, are distinct, advertise what the host reaches, and n4 joins', (t) => {
  const flagToKey = new Map(
    Object.entries(OPTION_FLAGS).map(([k, f]) => [f, k as keyof NodeOptions]),
  );
  const nodes = Object.entries(services).filter(
    ([, s]) => (s['command'] as string[])[1] === 'bin/tickraft',
  );
  t.equal(nodes.length, 4);
  const seen = { ids: new Set<string>(), volumes: new Set<string>(), ports: new Set<number>() };
  const initial = nodes.filter(([, s]) => s['profiles'] === undefined).map(([name]) => name);
  t.same(initial, ['n1', 'n2', 'n3'], 'a plain `docker compose up` starts three nodes');
  const listenOf = new Map<string, string>();
  for (const [name, svc] of nodes) {
    const args = pairs((svc['command'] as string[]).slice(3));
    const options: Record<string, string> = {};
    for (const [flag, value] of args) options[flagToKey.get(flag)!] = value;
    const c = compileNodeOptions(options);
    listenOf.set(name, `${c.listen.host}:${c.listen.port}`);
    t.equal(c.id, name, 'the node id is the service name');
    t.equal(c.listen.host, name, 'the API listens on the service name (where nodes forward)');
    if (initial.includes(name)) {
      t.same(
        [...(c.initialCluster?.keys() ?? [])].sort(),
        initial,
        'the initial cluster names every initial node',
      );
      t.equal(
        c.initialCluster?.get(name),
        `${name}:${c.peerListen.port}`,
        'peers dial its peer port',
      );
    } else {
      t.equal(c.initialCluster, undefined, `${name} does not bootstrap`);
      t.ok(c.join, `${name} joins`);
      t.ok(
        [...listenOf.entries()].some(([m, a]) => initial.includes(m) && a === c.join),
        `${name} joins through a member's API address (${c.join})`,
      );
      t.same(svc['depends_on'], ['n1'], `${name} starts after the member it joins through`);
    }
    const volumes = svc['volumes'] as string[];
    t.equal(volumes.length, 1);
    const [volume, target] = volumes[0]!.split(':') as [string, string];
    t.equal(target, c.dataDir, `${name}: --data-dir is its volume`);
    t.ok(volume in (compose['volumes'] as Obj), `${name}: volume ${volume} is declared`);
    t.notOk(seen.volumes.has(volume), `${name}: own volume`);
    seen.volumes.add(volume);
    t.notOk(seen.ids.has(c.id));
    seen.ids.add(c.id);
    const published = publishedPorts(name, svc);
    const api = published.find((p) => p.inside === c.listen.port);
    t.ok(api, `${name}: publishes its API port`);
    t.ok(
      published.some((p) => p.inside === c.metricsListen?.port),
      `${name}: publishes its metrics port`,
    );
    // What ClusterStatus tells a client on the host must be where the host reaches the node.
    t.ok(c.advertiseAddress, `${name}: advertises an address`);
    t.equal(
      `${c.advertiseAddress?.host}:${c.advertiseAddress?.port}`,
      `${api?.ip}:${api?.host}`,
      `${name}: advertises the host address its API port is published on`,
    );
    for (const p of published) {
      t.notOk(seen.ports.has(p.host), `${name}: host port ${p.host} is its own`);
      seen.ports.add(p.host);
    }
  }
  for (const p of publishedPorts('sink', services['sink']!))
    t.notOk(seen.ports.has(p.host), `sink host port ${p.host} is its own`);
  t.end();
});

t.test('the Dockerfile', (t) => {
  const text = readFileSync(`${ROOT}Dockerfile`, 'utf8');
  t.match(text, /^FROM node:20-slim$/m);
  t.match(text, /npm ci --omit=dev/);
  for (const dir of ['bin', 'src', 'proto', 'package.json', 'package-lock.json'])
    t.match(text, new RegExp(`^COPY .*\\b${dir.replace('.', '\\.')}\\b`, 'm'), `copies ${dir}`);
  t.match(
    text,
    /^COPY src[^]*^RUN npm run build$/m,
    'builds dist/ once the sources are in (the bins run it)',
  );
  const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as Obj;
  for (const dep of ['esbuild', 'tsx'])
    t.ok((pkg['dependencies'] as Obj)[dep], `${dep} is a runtime dependency (the build needs it)`);
  t.end();
});
