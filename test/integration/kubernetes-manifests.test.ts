// deploy/kubernetes/ checked without a Kubernetes cluster (none runs here or in CI):
//
// - kubectl (Debian's kubernetes-client on a fresh machine) reads the directory as
//   `kubectl apply --dry-run=client -f deploy/kubernetes/` does for an operator. A client dry run
//   still asks the API server's discovery which kinds exist, so kubectl talks to a stand-in API
//   server in this process that lists the real resources of the group-versions Kubernetes serves
//   (core v1, apps/v1, policy/v1) and has no objects. What kubectl checks this way: the YAML
//   parses, every document is an object of a kind and apiVersion that exists (a PodDisruptionBudget
//   under policy/v1beta1 or a misspelt kind fails), metadata decodes into Kubernetes' types
//   (names present, labels strings), and apply runs its create path for each. With no OpenAPI
//   document to be had offline, it runs with --validate=false: field names and types inside
//   `spec` are NOT checked by kubectl. The checks below read every field this deployment relies on
//   by its exact API name instead, so a misspelt one shows up as missing.
// - The objects fit together: Service and PDB selectors match the pod labels, the StatefulSet's
//   serviceName is the headless Service (publishing pods before they are ready, or a new cluster
//   could never form), probes hit /readyz and /healthz on --metrics-listen's port over HTTPS
//   (the node serves metrics with its --tls-cert), every mounted volume is declared, the TLS and
//   token files the flags name lie in the mounted Secrets, and the grace period covers the
//   preStop pause plus the bounded graceful stop (--shutdown-timeout-ms plus the margin
//   src/server/main.ts allows past it).
// - The entrypoint (configmap-start.yaml) is run for real with `sh`, with the StatefulSet's env
//   (fieldRefs filled in for a pod), for each way a pod starts: creating the cluster, restarting,
//   joining (scale-up), joining after its ordinal's earlier node was removed (a fresh id), an
//   empty volume whose node had served (refused), and no cluster answering. `node` is a stand-in
//   on PATH that answers `bin/tickctl` with a given ClusterStatus and records the `bin/tickraft`
//   argv; `node -e` (the script's JSON reading) runs the real node.
// - Every flag the manifests and the entrypoint pass to `tickraft serve` is listed by a real
//   `node bin/tickraft serve --help`, and the argv compiles (compileNodeOptions: ids, host:port
//   shapes, --initial-cluster naming the node itself, --join apart from --initial-cluster); the
//   tickctl call of the entrypoint and every tickctl command of docs/KUBERNETES.md exist with
//   flags their --help lists.
import t, { type Test } from 'tap';
import { execFile, execFileSync } from 'node:child_process';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import {
  compileNodeOptions,
  OPTION_FLAGS,
  type CompiledNodeConfig,
  type NodeOptions,
} from '../../src/config/node-config.js';
import { runBin, TICKCTL, TICKRAFT } from '../helpers/tickctl.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DIR = join(ROOT, 'deploy/kubernetes');
const ENSURE = join(ROOT, 'scripts/ensure-package.sh');
/** The namespace the pods are pretended to run in (the manifests name none: `kubectl -n`). */
const NS = 'sched';

type Obj = Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
// The manifests

interface Manifest {
  readonly file: string;
  readonly obj: Obj;
}

function loadManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(DIR)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(DIR, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      const obj = doc.toJS() as Obj | null;
      if (obj !== null) out.push({ file, obj });
    }
  }
  return out;
}

const manifests = loadManifests();

/** A nested field, or undefined if any step is missing. */
function at(obj: unknown, ...path: (string | number)[]): unknown {
  let cur = obj;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[p];
  }
  return cur;
}

function only(kind: string, name?: string): Obj {
  const found = manifests.filter(
    (m) => m.obj['kind'] === kind && (name === undefined || at(m.obj, 'metadata', 'name') === name),
  );
  if (found.length !== 1)
    throw new Error(`expected one ${kind} ${name ?? ''}, got ${found.length}`);
  return found[0]!.obj;
}

const sts = only('StatefulSet');
const podSpec = at(sts, 'spec', 'template', 'spec') as Obj;
const container = (podSpec['containers'] as Obj[])[0]!;
const containerArgs = container['args'] as string[];
const envList = container['env'] as Obj[];
const startScript = at(only('ConfigMap', 'tickraft-start'), 'data', 'start.sh') as string;

/** `--flag value` pairs (every flag these commands use takes a value). */
function pairs(args: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) m.set(args[i]!, args[i + 1] ?? '');
  return m;
}

const argPairs = pairs(containerArgs);

function envValue(name: string): string {
  const e = envList.find((x) => x['name'] === name);
  if (e === undefined || typeof e['value'] !== 'string') throw new Error(`no env ${name}`);
  return e['value'];
}

function containerPort(name: string): number {
  const p = (container['ports'] as Obj[]).find((x) => x['name'] === name);
  if (p === undefined) throw new Error(`no container port ${name}`);
  return p['containerPort'] as number;
}

/** The mount path of the volume mounted from the pod volume (or claim template) `volume`. */
function mountOf(volume: string): string {
  const m = (container['volumeMounts'] as Obj[]).find((x) => x['name'] === volume);
  if (m === undefined) throw new Error(`volume ${volume} is not mounted`);
  return m['mountPath'] as string;
}

function volume(name: string): Obj {
  const v = (podSpec['volumes'] as Obj[]).find((x) => x['name'] === name);
  if (v === undefined) throw new Error(`no volume ${name}`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// kubectl against a stand-in API server

/** What Kubernetes serves for the group-versions these manifests may use (resource, Kind). */
const API_RESOURCES: Record<string, [string, string][]> = {
  v1: [
    ['configmaps', 'ConfigMap'],
    ['secrets', 'Secret'],
    ['services', 'Service'],
    ['persistentvolumeclaims', 'PersistentVolumeClaim'],
    ['pods', 'Pod'],
  ],
  'apps/v1': [
    ['statefulsets', 'StatefulSet'],
    ['deployments', 'Deployment'],
  ],
  'policy/v1': [['poddisruptionbudgets', 'PodDisruptionBudget']],
};

/**
 * An API server with discovery only: the kinds above exist, no object does (404 for every GET of
 * one), so `apply` takes its create path. Records every request that is not a GET, which a
 * client-side dry run must never send.
 */
async function standInApiServer(): Promise<{ url: string; writes: string[]; close: () => void }> {
  const writes: string[] = [];
  const json = (res: ServerResponse, code: number, body: unknown): void => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const groups = Object.keys(API_RESOURCES).filter((gv) => gv.includes('/'));
  const server = createServer((req, res) => {
    if (req.method !== 'GET') writes.push(`${req.method} ${req.url}`);
    const path = (req.url ?? '').split('?')[0]!;
    // Newer kubectl asks for aggregated discovery first; a plain answer makes it use the
    // per-group documents below, which every kubectl version reads.
    if (path === '/api') return json(res, 200, { kind: 'APIVersions', versions: ['v1'] });
    if (path === '/apis')
      return json(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: groups.map((gv) => {
          const version = { groupVersion: gv, version: gv.split('/')[1] };
          return { name: gv.split('/')[0], versions: [version], preferredVersion: version };
        }),
      });
    const gv = path === '/api/v1' ? 'v1' : path.startsWith('/apis/') ? path.slice(6) : '';
    const resources = API_RESOURCES[gv];
    if (resources !== undefined)
      return json(res, 200, {
        kind: 'APIResourceList',
        groupVersion: gv,
        resources: resources.map(([name, kind]) => ({
          name,
          singularName: '',
          namespaced: true,
          kind,
          verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'],
        })),
      });
    json(res, 404, {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'NotFound',
      code: 404,
      message: `${path} not found`,
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, writes, close: () => server.close() };
}

function hasKubectl(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** As `npm test` does first (test:deps), so that this file also runs alone on a fresh machine. */
function ensureKubectl(): void {
  if (hasKubectl()) return;
  execFileSync(
    'sh',
    [ENSURE, 'kubernetes-client', 'command -v kubectl', 'the Kubernetes manifests check'],
    { stdio: 'inherit' },
  );
  if (!hasKubectl())
    throw new Error('this check needs kubectl: apt-get install kubernetes-client (Debian)');
}

function run(
  command: string,
  args: readonly string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { ...opts, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

t.test('kubectl apply --dry-run=client accepts the directory', async (t) => {
  ensureKubectl();
  const api = await standInApiServer();
  t.teardown(api.close);
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-kubectl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'stand-in', cluster: { server: api.url } }],
      users: [{ name: 'nobody', user: {} }],
      contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user: 'nobody' } }],
      'current-context': 'stand-in',
    }),
  );
  const res = await run('kubectl', [
    '--kubeconfig',
    kubeconfig,
    '--cache-dir',
    join(dir, 'cache'),
    '--namespace',
    NS,
    'apply',
    '--dry-run=client',
    '--validate=false',
    '-f',
    DIR,
  ]);
  t.equal(res.code, 0, `kubectl exits 0\n${res.stderr}`);
  for (const { file, obj } of manifests) {
    const kind = (obj['kind'] as string).toLowerCase();
    const name = at(obj, 'metadata', 'name') as string;
    t.match(
      res.stdout,
      new RegExp(`^${kind}(\\.[a-z.]+)?/${name} created \\(dry run\\)$`, 'm'),
      `${file}: ${kind}/${name}`,
    );
  }
  t.same(api.writes, [], 'the dry run sent nothing but reads');
});

// ---------------------------------------------------------------------------------------------
// How the objects fit together

t.test('labels, selectors and Services line up', (t) => {
  const podLabels = at(sts, 'spec', 'template', 'metadata', 'labels') as Record<string, string>;
  const matches = (selector: unknown): boolean =>
    selector !== null &&
    typeof selector === 'object' &&
    Object.keys(selector).length > 0 &&
    Object.entries(selector).every(([k, v]) => podLabels[k] === v);
  for (const { file, obj } of manifests) {
    t.equal(at(obj, 'metadata', 'namespace'), undefined, `${file}: no namespace (kubectl -n)`);
    t.equal(at(obj, 'metadata', 'labels', 'app.kubernetes.io/name'), 'tickraft', `${file} label`);
  }
  t.ok(matches(at(sts, 'spec', 'selector', 'matchLabels')), 'StatefulSet selector');
  const peer = only('Service', at(sts, 'spec', 'serviceName') as string);
  t.equal(at(peer, 'spec', 'clusterIP'), 'None', 'serviceName is the headless Service');
  t.equal(at(peer, 'spec', 'publishNotReadyAddresses'), true, 'it publishes unready pods');
  t.equal(envValue('TICKRAFT_PEER_SERVICE'), at(peer, 'metadata', 'name'));
  const client = only('Service', 'tickraft');
  t.not(at(client, 'spec', 'clusterIP'), 'None', 'the client Service balances');
  t.equal(
    envValue('TICKCTL_ENDPOINT'),
    `tickraft.$(POD_NAMESPACE).svc.$(TICKRAFT_CLUSTER_DOMAIN):${at(client, 'spec', 'ports', 0, 'port') as number}`,
    'tickctl in a pod dials the client Service',
  );
  for (const svc of [peer, client]) {
    t.ok(matches(at(svc, 'spec', 'selector')), `${at(svc, 'metadata', 'name') as string} selector`);
    for (const p of at(svc, 'spec', 'ports') as Obj[])
      t.equal(containerPort(p['targetPort'] as string), p['port'], `port ${p['name'] as string}`);
  }
  const pdb = only('PodDisruptionBudget');
  t.equal(at(pdb, 'spec', 'maxUnavailable'), 1, 'at most one node down at a time');
  t.ok(matches(at(pdb, 'spec', 'selector', 'matchLabels')), 'PDB selector');
  t.equal(at(sts, 'spec', 'podManagementPolicy'), 'Parallel', 'pods start together');
  t.equal(
    at(sts, 'spec', 'updateStrategy', 'type'),
    'OnDelete',
    'no rolling update mixes two releases (docs/OPERATIONS.md: one release per cluster)',
  );
  t.ok(
    (at(sts, 'spec', 'replicas') as number) >= Number(envValue('TICKRAFT_INITIAL_NODES')),
    'replicas cover the initial nodes',
  );
  t.equal(podSpec['enableServiceLinks'], false, 'no TICKRAFT_* variables from the Services');
  t.end();
});

t.test('volumes, Secrets and the files the flags name', (t) => {
  const declared = new Set([
    ...(podSpec['volumes'] as Obj[]).map((v) => v['name'] as string),
    ...(at(sts, 'spec', 'volumeClaimTemplates') as Obj[]).map((v) => at(v, 'metadata', 'name')),
  ]);
  for (const m of container['volumeMounts'] as Obj[])
    t.ok(declared.has(m['name']), `mount ${m['name'] as string} is declared`);
  t.equal(envValue('TICKRAFT_VOLUME'), mountOf('data'), 'the entrypoint writes to the PVC');
  t.same(
    at(sts, 'spec', 'volumeClaimTemplates', 0, 'spec', 'accessModes'),
    ['ReadWriteOnce'],
    'one volume per pod',
  );
  t.same(at(sts, 'spec', 'persistentVolumeClaimRetentionPolicy'), {
    whenScaled: 'Delete',
    whenDeleted: 'Retain',
  });
  t.equal(envValue('TICKRAFT_RUN'), mountOf('run'));
  t.equal(at(volume('run'), 'emptyDir', 'medium'), 'Memory', 'the token copy stays in memory');
  // The start script is the ConfigMap's key, where the command runs it from.
  t.same(container['command'], ['sh', `${mountOf('start')}/start.sh`]);
  t.equal(at(volume('start'), 'configMap', 'name'), 'tickraft-start');
  /** The Secret and key behind a path under a Secret volume's mount. */
  const secretFile = (path: string): [string, string] | undefined => {
    for (const v of podSpec['volumes'] as Obj[]) {
      const secret = at(v, 'secret', 'secretName') as string | undefined;
      if (secret === undefined) continue;
      const dir = mountOf(v['name'] as string);
      if (path.startsWith(`${dir}/`)) return [secret, path.slice(dir.length + 1)];
    }
    return undefined;
  };
  t.same(secretFile(envValue('TICKRAFT_ADMIN_TOKEN')), ['tickraft-admin-token', 'token']);
  t.same(secretFile(envValue('TICKCTL_CA_FILE')), ['tickraft-api-tls', 'ca.crt']);
  const tls: Record<string, [string, string]> = {
    '--tls-cert': ['tickraft-api-tls', 'tls.crt'],
    '--tls-key': ['tickraft-api-tls', 'tls.key'],
    '--tls-ca': ['tickraft-api-tls', 'ca.crt'],
    '--peer-tls-cert': ['tickraft-peer-tls', 'tls.crt'],
    '--peer-tls-key': ['tickraft-peer-tls', 'tls.key'],
    '--peer-tls-ca': ['tickraft-peer-tls', 'ca.crt'],
  };
  for (const [flag, want] of Object.entries(tls))
    t.same(secretFile(argPairs.get(flag) ?? ''), want, `${flag} is ${want.join(' key ')}`);
  for (const v of podSpec['volumes'] as Obj[])
    if (at(v, 'secret') !== undefined)
      t.equal(at(v, 'secret', 'defaultMode'), 0o440, `${v['name'] as string}: group-readable`);
  t.equal(at(podSpec, 'securityContext', 'fsGroup'), 1000, 'the node user reads them');
  t.end();
});

t.test('probes, the image, and a grace period that covers the graceful stop', (t) => {
  const metrics = argPairs.get('--metrics-listen') ?? '';
  t.equal(metrics, `0.0.0.0:${containerPort('metrics')}`, 'metrics on the probed port');
  for (const [probe, path] of [
    ['readinessProbe', '/readyz'],
    ['livenessProbe', '/healthz'],
  ] as const) {
    t.equal(at(container, probe, 'httpGet', 'path'), path, probe);
    t.equal(at(container, probe, 'httpGet', 'port'), 'metrics', `${probe} port`);
    // The metrics listener serves HTTPS whenever the node has --tls-cert.
    t.equal(at(container, probe, 'httpGet', 'scheme'), 'HTTPS', `${probe} scheme`);
  }
  const preStop = at(container, 'lifecycle', 'preStop', 'exec', 'command') as string[];
  t.equal(preStop[0], 'sleep', 'preStop pauses');
  const main = readFileSync(join(ROOT, 'src/server/main.ts'), 'utf8');
  const margin = /config\.shutdownTimeoutMs \+ (\d+)\)/.exec(main);
  t.ok(margin, 'main.ts bounds the stop at --shutdown-timeout-ms plus a margin');
  const stopMs = Number(argPairs.get('--shutdown-timeout-ms'));
  const neededMs = Number(preStop[1]) * 1000 + stopMs + Number(margin?.[1]);
  const graceMs = (podSpec['terminationGracePeriodSeconds'] as number) * 1000;
  t.ok(graceMs > neededMs, `grace ${graceMs} ms > preStop + stop bound + margin ${neededMs} ms`);
  // The entrypoint runs `node bin/...` relative to the image's WORKDIR, as the image's user.
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  t.match(dockerfile, /^FROM node:\d+-slim$/m, 'a Debian-based image: sh, cp, sleep are there');
  t.match(dockerfile, /^WORKDIR \/app$/m);
  t.match(dockerfile, /^USER node$/m, 'the image runs as node (uid 1000)');
  t.equal(container['workingDir'], undefined, 'the image WORKDIR is kept');
  const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Obj)['version'];
  t.equal((container['image'] as string).split(':')[1], version, 'image tag = package version');
  t.end();
});

// ---------------------------------------------------------------------------------------------
// The entrypoint, run for real

const work = mkdtempSync(join(tmpdir(), 'tickraft-k8s-start-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const stubBin = join(work, 'bin');
mkdirSync(stubBin);
writeFileSync(join(work, 'start.sh'), startScript);
writeFileSync(join(work, 'admin.token'), `${'k'.repeat(64)}\n`);
chmodSync(join(work, 'admin.token'), 0o440);
// `node` as the script calls it: tickctl answers from STUB_STATUS (or "no answer", exit 5), and
// tickraft only records its argv, one word a line; everything else is the real node.
writeFileSync(
  join(stubBin, 'node'),
  [
    '#!/bin/sh',
    'case "$1" in',
    '  bin/tickctl)',
    '    shift; printf "%s\\n" "$*" >> "$STUB_LOG"',
    '    if [ -n "${STUB_STATUS:-}" ]; then cat "$STUB_STATUS"; exit 0; fi',
    '    echo "tickctl: the cluster did not answer in time" >&2; exit 5 ;;',
    '  bin/tickraft)',
    '    shift; printf "%s\\n" "$@" > "$STUB_ARGV"; exit 0 ;;',
    '  *) exec "$REAL_NODE" "$@" ;;',
    'esac',
    '',
  ].join('\n'),
);
chmodSync(join(stubBin, 'node'), 0o755);

const CLUSTER_DOMAIN = envValue('TICKRAFT_CLUSTER_DOMAIN');
const podHost = (pod: string): string =>
  `${pod}.${envValue('TICKRAFT_PEER_SERVICE')}.${NS}.svc.${CLUSTER_DOMAIN}`;
const API_PORT = containerPort('api');
const PEER_PORT = containerPort('peer');

/** The StatefulSet's env for one pod: fieldRefs filled in, $(VAR) expanded as Kubernetes does. */
function podEnv(pod: string, uid: string): Record<string, string> {
  const env: Record<string, string> = {};
  const fields: Record<string, string> = {
    'metadata.name': pod,
    'metadata.namespace': NS,
    'metadata.uid': uid,
  };
  for (const e of envList) {
    const field = at(e, 'valueFrom', 'fieldRef', 'fieldPath') as string | undefined;
    env[e['name'] as string] =
      field !== undefined
        ? fields[field]!
        : (e['value'] as string).replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, n: string) =>
            n in env ? env[n]! : m,
          );
  }
  return env;
}

interface MemberSeen {
  readonly id: string;
  /** The pod whose peer address the member holds. */
  readonly pod: string;
  readonly state: 'active' | 'draining' | 'removed';
  /** Whether it ever served (recorded its API address). */
  readonly served: boolean;
}

/** A ClusterStatus as `tickctl --json cluster status` prints it. */
function clusterStatus(members: readonly MemberSeen[]): string {
  return JSON.stringify({
    nodes: members.map((m) => ({
      id: m.id,
      peerAddress: `${podHost(m.pod)}:${PEER_PORT}`,
      apiAddress: m.served ? `${podHost(m.pod)}:${API_PORT}` : '',
      state: m.state,
      reachable: m.state !== 'removed',
      listenAddress: m.served ? `${podHost(m.pod)}:${API_PORT}` : '',
    })),
    groups: [],
    answeredBy: 'tickraft-0',
    moves: [],
    splits: [],
  });
}

interface PodStart {
  readonly code: number;
  readonly stderr: string;
  /** The argv `tickraft serve` got, or undefined if it was not started. */
  readonly argv: string[] | undefined;
  /** Each tickctl invocation's arguments. */
  readonly tickctl: string[];
  readonly volume: string;
  /** Mode and text of the admin token the node was given, if it was started. */
  readonly token: { mode: number; text: string } | undefined;
}

let runs = 0;

/**
 * Runs the entrypoint as pod `pod` on `volume` (a directory kept across starts) and `run` (the
 * pod's in-memory emptyDir, kept across container restarts of one pod; a new one by default).
 */
async function startPod(
  pod: string,
  opts: { uid: string; volume: string; run?: string; cluster?: readonly MemberSeen[] },
): Promise<PodStart> {
  const n = ++runs;
  const env: Record<string, string> = {
    ...podEnv(pod, opts.uid),
    // The pod's absolute paths, moved into this test's directory.
    TICKRAFT_VOLUME: opts.volume,
    TICKRAFT_RUN: opts.run ?? join(work, `run-${n}`),
    TICKRAFT_ADMIN_TOKEN: join(work, 'admin.token'),
    PATH: `${stubBin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
    REAL_NODE: process.execPath,
    STUB_ARGV: join(work, `argv-${n}`),
    STUB_LOG: join(work, `tickctl-${n}`),
  };
  if (opts.cluster !== undefined) {
    env['STUB_STATUS'] = join(work, `status-${n}.json`);
    writeFileSync(env['STUB_STATUS'], clusterStatus(opts.cluster));
  }
  mkdirSync(opts.volume, { recursive: true });
  const res = await run('sh', [join(work, 'start.sh'), ...containerArgs], { cwd: work, env });
  const read = (f: string): string[] | undefined =>
    existsSync(f) ? readFileSync(f, 'utf8').split('\n').slice(0, -1) : undefined;
  return {
    code: res.code,
    stderr: res.stderr,
    argv: read(env['STUB_ARGV']!),
    tickctl: read(env['STUB_LOG']!) ?? [],
    volume: opts.volume,
    token: tokenGiven(read(env['STUB_ARGV']!)),
  };
}

function tokenGiven(argv: string[] | undefined): PodStart['token'] {
  const file = argv === undefined ? undefined : pairs(argv.slice(1)).get('--admin-token-file');
  if (file === undefined) return undefined;
  return { mode: statSync(file).mode % 0o1000, text: readFileSync(file, 'utf8') };
}

const flagToKey = new Map(
  Object.entries(OPTION_FLAGS).map(([k, f]) => [f, k as keyof NodeOptions]),
);

/** The argv (after `serve`) as tickraft compiles it; numbers as its flag parsers make them. */
function compileArgv(argv: readonly string[]): CompiledNodeConfig {
  const options: Record<string, string | number> = {};
  for (const [flag, value] of pairs(argv)) {
    const key = flagToKey.get(flag);
    if (key === undefined) throw new Error(`${flag} is no tickraft serve option`);
    options[key] = /^\d+$/.test(value) ? Number(value) : value;
  }
  return compileNodeOptions(options);
}

/** Every argv the entrypoint handed to `tickraft serve`, for the --help check at the end. */
const servedArgvs: string[][] = [];
/** Every tickctl call the entrypoint made. */
const tickctlCalls: string[] = [];

function started(t: Test, s: PodStart): CompiledNodeConfig | undefined {
  t.equal(s.code, 0, `exit 0\n${s.stderr}`);
  t.ok(s.argv, 'tickraft serve was started');
  if (s.argv === undefined) return undefined;
  t.equal(s.argv[0], 'serve');
  servedArgvs.push(s.argv.slice(1));
  tickctlCalls.push(...s.tickctl);
  const c = compileArgv(s.argv.slice(1));
  t.same(s.argv.slice(-containerArgs.length), containerArgs, "the container's args come last");
  t.equal(c.dataDir, join(s.volume, 'node'), 'data on the pod volume');
  t.same(
    s.token,
    { mode: 0o600, text: readFileSync(join(work, 'admin.token'), 'utf8') },
    "the Secret's token, in a file only the node's user can read",
  );
  return c;
}

function refused(t: Test, s: PodStart, why: RegExp): void {
  t.equal(s.code, 1, 'exit 1: the pod restarts and asks again');
  t.equal(s.argv, undefined, 'tickraft serve was not started');
  t.match(s.stderr, why);
  t.notOk(existsSync(join(s.volume, 'identity')), 'no identity chosen');
  tickctlCalls.push(...s.tickctl);
}

const initialIds = Array.from(
  { length: Number(envValue('TICKRAFT_INITIAL_NODES')) },
  (_, i) => `tickraft-${i}`,
);
const CLIENT = `tickraft.${NS}.svc.${CLUSTER_DOMAIN}:${API_PORT}`;
const uid = (n: number): string => `${String(n).repeat(8)}-1111-2222-3333-444455556666`;
const active = (pod: string, id = pod): MemberSeen => ({ id, pod, state: 'active', served: true });
const removed = (pod: string, id = pod): MemberSeen => ({
  id,
  pod,
  state: 'removed',
  served: true,
});

t.test('entrypoint: the initial pods create the cluster, and restart as themselves', async (t) => {
  for (const [i, pod] of initialIds.entries()) {
    const s = await startPod(pod, {
      uid: uid(i),
      volume: join(work, `vol-${pod}`),
      run: join(work, `run-${pod}`),
    });
    const c = started(t, s);
    t.equal(c?.id, pod, 'the node id is the pod name');
    t.equal(c?.listen.host, podHost(pod), 'listens on its name under the headless Service');
    t.equal(c?.listen.port, API_PORT);
    t.equal(c?.peerListen.host, podHost(pod));
    t.equal(c?.peerListen.port, PEER_PORT);
    t.same(
      [...(c?.initialCluster?.entries() ?? [])],
      initialIds.map((id) => [id, `${podHost(id)}:${PEER_PORT}`]),
      '--initial-cluster: the initial pods, as the others dial them',
    );
    t.equal(c?.join, undefined);
    t.equal(s.tickctl.length, 1, 'asked the cluster once, and got no answer');
  }
  // A container restart, whatever the cluster would say: the identity on the volume decides.
  const again = await startPod('tickraft-1', {
    uid: uid(1),
    volume: join(work, 'vol-tickraft-1'),
    run: join(work, 'run-tickraft-1'),
    cluster: initialIds.map((id) => active(id)),
  });
  const c = started(t, again);
  t.equal(c?.id, 'tickraft-1');
  t.ok(c?.initialCluster, 'still with --initial-cluster');
  t.same(again.tickctl, [], 'a restart asks nobody');
});

t.test('entrypoint: scale-up pods join, under a fresh id if the name was used', async (t) => {
  const cluster = initialIds.map((id) => active(id));
  const s = await startPod('tickraft-3', { uid: uid(3), volume: join(work, 'vol-3'), cluster });
  const c = started(t, s);
  t.equal(c?.id, 'tickraft-3');
  t.equal(c?.join, CLIENT, 'joins through the client Service');
  t.equal(c?.initialCluster, undefined);
  // tickraft-3 was drained, removed and scaled away; scaled up again, its ordinal comes back.
  const back = await startPod('tickraft-3', {
    uid: uid(5),
    volume: join(work, 'vol-3-again'),
    cluster: [...cluster, removed('tickraft-3')],
  });
  const c2 = started(t, back);
  t.equal(c2?.id, 'tickraft-3-55555555', 'ids are never reused: pod name and pod UID');
  t.equal(c2?.join, CLIENT);
  const noAnswer = await startPod('tickraft-4', { uid: uid(4), volume: join(work, 'vol-4') });
  refused(t, noAnswer, /cannot tell whether this empty volume is a new node.*tickctl exit 5/);
});

t.test('entrypoint: an empty volume whose node had served is refused', async (t) => {
  const cluster = initialIds.map((id) => active(id));
  const lost = await startPod('tickraft-1', {
    uid: uid(6),
    volume: join(work, 'vol-lost'),
    cluster,
  });
  refused(
    t,
    lost,
    /member tickraft-1 already served.*'tickctl cluster remove-node tickraft-1 --force'/,
  );
  // After `remove-node tickraft-1 --force` the pod joins as a new node.
  const after = await startPod('tickraft-1', {
    uid: uid(6),
    volume: join(work, 'vol-lost'),
    cluster: [...cluster.filter((m) => m.id !== 'tickraft-1'), removed('tickraft-1')],
  });
  const c = started(t, after);
  t.equal(c?.id, 'tickraft-1-66666666');
  t.equal(c?.join, CLIENT, 'joins: its old id is not in --initial-cluster any more');
  t.equal(c?.initialCluster, undefined);
  // An initial member that never served (its pod was slow to start) starts as itself.
  const late = await startPod('tickraft-2', {
    uid: uid(2),
    volume: join(work, 'vol-late'),
    cluster: [
      active('tickraft-0'),
      active('tickraft-1'),
      { ...active('tickraft-2'), served: false },
    ],
  });
  const c3 = started(t, late);
  t.equal(c3?.id, 'tickraft-2');
  t.ok(c3?.initialCluster, 'with --initial-cluster');
});

// ---------------------------------------------------------------------------------------------
// Flags against the real bins' --help

const helpCache = new Map<string, Promise<Set<string>>>();
/** The flags `node <bin> <words…> --help` lists. */
function flagsOf(bin: string, words: readonly string[]): Promise<Set<string>> {
  const key = `${bin} ${words.join(' ')}`;
  let flags = helpCache.get(key);
  if (flags === undefined) {
    flags = runBin(bin, [...words, '--help']).then((r) => {
      if (r.code !== 0) throw new Error(`${key} --help exited ${r.code}: ${r.stderr}`);
      return new Set([...r.stdout.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]));
    });
    helpCache.set(key, flags);
  }
  return flags;
}

t.test('every flag passed to tickraft serve is one it lists', async (t) => {
  const accepted = await flagsOf(TICKRAFT, ['serve']);
  t.ok(accepted.size > 20, 'tickraft serve --help lists its flags');
  t.ok(servedArgvs.length >= 6, 'argvs of every kind of start were collected');
  const modes = new Set<string>();
  for (const argv of [containerArgs, ...servedArgvs]) {
    t.equal(argv.length % 2, 0, 'flags come with values');
    for (const flag of pairs(argv).keys()) {
      t.ok(accepted.has(flag), `tickraft serve accepts ${flag}`);
      if (flag === '--join' || flag === '--initial-cluster') modes.add(flag);
    }
  }
  t.same([...modes].sort(), ['--initial-cluster', '--join'], 'both ways of starting were seen');
});

t.test("the entrypoint's tickctl call and docs/KUBERNETES.md's commands exist", async (t) => {
  const status = await flagsOf(TICKCTL, ['cluster', 'status']);
  t.ok(tickctlCalls.length > 0);
  for (const call of tickctlCalls) {
    const words = call.split(' ');
    t.same(words.slice(-2), ['cluster', 'status'], call);
    for (const w of words) if (w.startsWith('--')) t.ok(status.has(w), `cluster status ${w}`);
  }
  // Each `tickctl …` line of the guide's shell blocks: the command path is a real one (its
  // --help answers) and each flag is one its --help lists.
  const guide = readFileSync(join(ROOT, 'docs/KUBERNETES.md'), 'utf8');
  const blocks = [...guide.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  const commands = blocks
    .flatMap((b) => b.replace(/\\\n\s*/g, ' ').split('\n'))
    .map((l) => /(?:^|\s)tickctl\s+(.*)$/.exec(l.trim())?.[1])
    .filter((c): c is string => c !== undefined);
  t.ok(commands.length >= 5, `the guide runs tickctl (${commands.length} commands)`);
  const checks = commands.map(async (c) => {
    const words = c.split(/\s+/).filter((w) => w !== '');
    const path = words.slice(0, words[0] === 'cluster' || words[0] === 'leader' ? 2 : 1);
    const accepted = await flagsOf(TICKCTL, path);
    for (const w of words.slice(path.length))
      if (w.startsWith('--'))
        t.ok(accepted.has(w.split('=')[0]!), `tickctl ${path.join(' ')} ${w}`);
  });
  await Promise.all(checks);
});
