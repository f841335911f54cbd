// TLS with real processes on loopback, certificates made with the openssl CLI in a temporary
// directory (test/helpers/certs.ts), as docs/OPERATIONS.md ("TLS") tells an operator to:
//
// - bad TLS flags: a partial --peer-tls-* set, --tls-key alone, --tls-client-ca without a
//   certificate, an unreadable or non-PEM file, a key of another certificate, a peer certificate
//   of another CA: exit 2 naming the flag; a plaintext node says so at start;
// - a 3-node cluster with client-API TLS requiring client certificates (one CA) and mutual TLS
//   between nodes (another CA) comes up; tickctl (--ca-file, --cert-file, --key-file) and the
//   ApiClient create jobs through nodes that do not lead (forwarded node to node over TLS); they
//   fire at a plain-HTTP webhook sink on loopback; tickctl worker leases a run over TLS;
//   /metrics is served over HTTPS;
// - a plaintext client, a client without a certificate and one with another CA's certificate
//   are refused;
// - a node whose peer certificate another CA signed (holding a valid client-API certificate)
//   cannot join: --join exits 1 with PEER_TLS_UNVERIFIED and the members stay three; started as
//   if it were a member of the initial cluster, its Raft connections are refused by every node
//   (logged with its issuer, counted in tickraft_peer_connections_refused_total) and no node
//   records it;
// - SIGHUP reloads the API certificate (the next handshake presents the new one); a bad file on
//   reload is refused and the node keeps serving.
import t, { type Test } from 'tap';
import * as grpc from '@grpc/grpc-js';
import { copyFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:https';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { spawn } from 'node:child_process';
import { ApiCallError, ApiClient, type ClientTlsOptions } from '../../src/api/client.js';
import { retryUnavailable } from '../helpers/api-retry.js';
import { TestCa } from '../helpers/certs.js';
import { eventually, freePort, ProcCluster, ProcNode } from '../helpers/cluster.js';
import { nodeCommand } from '../helpers/node-child.js';
import { tempDir } from '../helpers/temp-dir.js';
import { runBin, runTickctl, TICKCTL, TICKRAFT } from '../helpers/tickctl.js';
import { TEST_SECRET, WebhookSink } from '../helpers/webhook-sink.js';

type Obj = Record<string, unknown>;

/** Waits until `ok()` holds; `why()` says what is still missing when it times out. */
function until(ok: () => boolean, why: () => string, timeoutMs: number): Promise<void> {
  return eventually(() => (ok() ? Promise.resolve() : Promise.reject(new Error(why()))), timeoutMs);
}

const dir = tempDir(t, 'tls-it');
const apiCa = TestCa.create(dir, 'api-ca');
const peerCa = TestCa.create(dir, 'peer-ca');
const otherCa = TestCa.create(dir, 'other-ca');

t.test('bad TLS flags exit 2 naming the flag; a plaintext node says so', async (t) => {
  const leaf = apiCa.issue('flags', ['127.0.0.1']);
  const strangerPeer = otherCa.issue('flags', ['127.0.0.1']);
  const junk = join(dir, 'junk.pem');
  writeFileSync(junk, 'not PEM\n');
  const serve = (...flags: string[]) =>
    runBin(
      TICKRAFT,
      [
        'serve',
        '--id',
        'n1',
        '--data-dir',
        join(dir, 'flags-data'),
        '--insecure-no-auth',
        ...flags,
      ],
      {
        t,
      },
    );
  const cases: [string[], RegExp][] = [
    [['--peer-tls-cert', leaf.cert], /--peer-tls-key: is required.*\n.*--peer-tls-ca: is required/],
    [
      ['--peer-tls-cert', leaf.cert, '--peer-tls-key', leaf.key],
      /tickraft: --peer-tls-ca: is required with --peer-tls-cert and --peer-tls-key/,
    ],
    [['--tls-key', leaf.key], /tickraft: --tls-cert: is required with --tls-key/],
    [['--tls-cert', leaf.cert], /tickraft: --tls-key: is required with --tls-cert/],
    [['--tls-client-ca', apiCa.cert], /tickraft: --tls-client-ca: needs --tls-cert and --tls-key/],
    [
      ['--tls-cert', join(dir, 'missing.pem'), '--tls-key', leaf.key],
      /tickraft: --tls-cert: cannot read .*missing\.pem: ENOENT/,
    ],
    [
      ['--tls-cert', junk, '--tls-key', leaf.key],
      /tickraft: --tls-cert: .* holds no PEM certificate/,
    ],
    [
      ['--tls-cert', leaf.cert, '--tls-key', strangerPeer.key],
      /tickraft: --tls-key: does not belong to the certificate of --tls-cert/,
    ],
    [
      [
        '--peer-tls-cert',
        strangerPeer.cert,
        '--peer-tls-key',
        strangerPeer.key,
        '--peer-tls-ca',
        peerCa.cert,
      ],
      /tickraft: --peer-tls-cert: CN=flags \(issued by CN=other-ca\) is not signed by a CA of --peer-tls-ca/,
    ],
  ];
  for (const [flags, message] of cases) {
    const r = await serve(...flags);
    t.equal(r.code, 2, `${flags.filter((f) => f.startsWith('--')).join(' ')}: exit 2`);
    t.match(r.stderr, message, 'naming the flag and the reason');
  }

  // A plaintext node on loopback starts, with a warning for each plaintext listener.
  const host = '127.0.0.1';
  const [api, peer] = [await freePort(host), await freePort(host)];
  const plain = new ProcNode(
    'n1',
    api,
    peer,
    join(dir, 'plain-data'),
    () => [
      '--id',
      'n1',
      '--data-dir',
      join(dir, 'plain-data'),
      '--listen',
      `${host}:${api}`,
      '--peer-listen',
      `${host}:${peer}`,
      '--initial-cluster',
      `n1=${host}:${peer}`,
      '--groups',
      '1',
      '--insecure-no-auth',
    ],
    host,
    0,
  );
  t.teardown(() => plain.kill9());
  plain.start();
  await until(
    () => plain.stdout.includes('"msg":"serving"'),
    () => `not serving yet: ${plain.stderr}`,
    30_000,
  );
  for (const flag of ['--listen', '--peer-listen'])
    t.match(
      plain.stdout,
      new RegExp(`"flag":"${flag}".*plaintext listener \\(no TLS\\)`),
      `${flag}: the plaintext warning`,
    );
  await plain.term();
  plain.close();
});

t.test('a TLS cluster: forwards, fires, and refuses what it must', async (t) => {
  const user = apiCa.issue('alice', []);
  const intruder = otherCa.issue('mallory', []);
  const clientTls: ClientTlsOptions = { ca: apiCa.pem, cert: user.certPem, key: user.keyPem };
  const cluster = await ProcCluster.create({
    groups: 4,
    extraArgs: ['--tick-ms', '20'],
    metrics: true,
  });
  const sink = new WebhookSink([TEST_SECRET]);
  const clients: ApiClient[] = [];
  t.teardown(async () => {
    for (const c of clients) c.close();
    cluster.cleanup();
    await sink.close();
  });
  await sink.start();
  const host = cluster.nodes[0]!.host;
  // Each node's certificates in files of its own (n1's API pair is replaced on disk below).
  const apiFiles = new Map<string, { cert: string; key: string }>();
  for (const n of cluster.nodes) {
    const api = apiCa.issue(n.id, [host]);
    const files = { cert: join(dir, `${n.id}-api.pem`), key: join(dir, `${n.id}-api.key`) };
    copyFileSync(api.cert, files.cert);
    copyFileSync(api.key, files.key);
    apiFiles.set(n.id, files);
    const peer = peerCa.issue(n.id, [host]);
    n.ownArgs = [
      ...['--tls-cert', files.cert, '--tls-key', files.key, '--tls-client-ca', apiCa.cert],
      ...['--peer-tls-cert', peer.cert, '--peer-tls-key', peer.key, '--peer-tls-ca', peerCa.cert],
    ];
  }
  cluster.startAll();
  await cluster.waitReady(90_000);
  for (const n of cluster.nodes) {
    t.match(n.stdout, /"msg":"TLS enabled"/, `${n.id} says TLS is on`);
    t.notMatch(n.stdout, /plaintext listener/, `${n.id} has no plaintext listener`);
  }
  const endpoint = (n: ProcNode) => `${n.host}:${n.apiPort}`;
  /** A client of `n` with the user's certificate, other TLS options, or 'plaintext'. */
  const client = (n: ProcNode, tls: ClientTlsOptions | 'plaintext' = clientTls) => {
    const c = new ApiClient(
      endpoint(n),
      5000,
      {},
      {
        token: cluster.adminToken,
        ...(tls === 'plaintext' ? {} : { tls }),
      },
    );
    clients.push(c);
    return c;
  };
  const [n1, n2, n3] = cluster.nodes as [ProcNode, ProcNode, ProcNode];
  const status = () => client(n1).call<Obj>('AdminService', 'ClusterStatus', {});
  await eventually(async () => {
    const nodes = (await status())['nodes'] as Obj[];
    if (nodes.length !== 3 || nodes.some((x) => x['apiAddress'] === ''))
      throw new Error('API addresses not all registered');
  }, 30_000);

  const tlsFlags = ['--ca-file', apiCa.cert, '--cert-file', user.cert, '--key-file', user.key];
  await t.test('tickctl and the ApiClient over TLS; forwarding; jobs fire', async (t) => {
    const tenant = await runTickctl(
      [
        ...tlsFlags,
        '--endpoint',
        endpoint(n2),
        'tenants',
        'create',
        'acme',
        '--secret',
        TEST_SECRET,
      ],
      { t },
    );
    t.equal(tenant.code, 0, `tickctl tenants create over TLS: ${tenant.stderr}`);
    const job = await runTickctl(
      [
        'jobs',
        'create',
        'via-tickctl',
        '--tenant',
        'acme',
        '--schedule',
        '* * * * * *',
        '--url',
        `${sink.url}/hook`,
        ...tlsFlags,
        '--endpoint',
        endpoint(n3),
      ],
      { t },
    );
    t.equal(job.code, 0, `tickctl jobs create over TLS: ${job.stderr}`);
    const leaders = new Map(
      ((await status())['groups'] as Obj[]).map((g) => [g['groupId'] as number, g['leader']]),
    );
    let forwarded = 0;
    for (let i = 0; i < 6; i++) {
      const via = cluster.nodes[i % 3]!;
      // A careful client: a group whose leadership is moving (leader balancing in the cluster's
      // first seconds) answers UNAVAILABLE, and the call is made again with its request id.
      const res = await retryUnavailable(() =>
        client(via).call<Obj>('JobService', 'CreateJob', {
          jobId: `api-${i}`,
          requestId: `req-api-${i}`,
          spec: { tenant: 'acme', schedule: '* * * * * *', target: { url: `${sink.url}/hook` } },
        }),
      );
      const groupId = (res['job'] as Obj)['groupId'] as number;
      if (leaders.get(groupId) !== via.id) forwarded++;
    }
    t.ok(forwarded > 0, `${forwarded} of 6 creates were forwarded to the group's leader over TLS`);
    const fired = ['via-tickctl', 'api-0', 'api-5'];
    await until(
      () => fired.every((id) => sink.of(id).some((r) => r.signatureOk)),
      () => `not fired: ${fired.filter((id) => sink.of(id).length === 0).join(', ')}`,
      20_000,
    );
    t.pass('jobs created over TLS fire at the webhook sink');

    const metrics = await httpsGet(`https://${host}:${n1.metricsPort}/metrics`, apiCa.pem);
    t.match(metrics, /tickraft_raft_commit_index/, '/metrics is served over HTTPS');
  });

  await t.test('tickctl worker over TLS', async (t) => {
    const env = { ...process.env, TICKRAFT_TOKEN: cluster.adminToken };
    const worker = spawn(
      ...nodeCommand(
        [TICKCTL, 'worker', '--endpoint', endpoint(n1), '--pool', 'tls', ...tlsFlags],
        env,
      ),
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    t.teardown(() => {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    });
    let out = '';
    worker.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    worker.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    await until(
      () => out.includes('serving pool tls'),
      () => `worker not up: ${out}`,
      20_000,
    );
    await client(n2).call('JobService', 'CreateJob', {
      jobId: 'w-tls',
      spec: { tenant: 'acme', schedule: '* * * * * *', target: { url: 'worker:tls' } },
    });
    await until(
      () => /lease {2}job w-tls/.test(out) && /done {3}fire acme\/w-tls:/.test(out),
      () => `no lease yet: ${out.slice(-300)}`,
      20_000,
    );
    t.pass('the worker leased and completed a run over TLS');
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
  });

  await t.test('refused: plaintext, no client certificate, another CA’s certificate', async (t) => {
    const refusedWith = async (tls: ClientTlsOptions | 'plaintext', what: string) => {
      const err = await client(n2, tls)
        .call('AdminService', 'ClusterStatus', {}, 3000)
        .catch((e: unknown) => e);
      t.ok(err instanceof ApiCallError, `${what}: the call fails`);
      t.equal((err as ApiCallError).status, grpc.status.UNAVAILABLE, `${what}: UNAVAILABLE`);
    };
    await refusedWith('plaintext', 'a plaintext client');
    await refusedWith({ ca: apiCa.pem }, 'TLS without a client certificate');
    await refusedWith(
      { ca: apiCa.pem, cert: intruder.certPem, key: intruder.keyPem },
      'a client certificate of another CA',
    );
    await refusedWith(
      { ca: otherCa.pem, cert: user.certPem, key: user.keyPem },
      'a client that does not trust the node’s CA',
    );
    const plain = await runTickctl(['cluster', 'status', '--endpoint', endpoint(n2)], { t });
    t.equal(plain.code, 5, 'tickctl without --ca-file: exit 5');
    t.match(plain.stderr, /give --ca-file/, 'and the message says what to give');
    const noCert = await runTickctl(
      ['cluster', 'status', '--ca-file', apiCa.cert, '--endpoint', endpoint(n2)],
      { t },
    );
    t.equal(noCert.code, 5, 'tickctl with --ca-file but no client certificate: exit 5');
    t.match(
      noCert.stderr,
      /--tls-client-ca refuses a client without --cert-file/,
      'and the message says what to check',
    );
    const halfPair = await runTickctl(
      ['cluster', 'status', '--ca-file', apiCa.cert, '--cert-file', user.cert],
      { t },
    );
    t.equal(halfPair.code, 2, 'tickctl --cert-file without --key-file: exit 2');
    t.match(halfPair.stderr, /--cert-file needs --key-file/, 'naming the missing flag');
  });

  const membersUnchanged = async (t: Test, what: string) => {
    const nodes = ((await status())['nodes'] as Obj[]).map((x) => x['id'] as string);
    t.same(nodes.sort(), ['n1', 'n2', 'n3'], `${what}: ClusterStatus lists n1, n2, n3 only`);
    for (const n of cluster.nodes) {
      const st = await n.status();
      t.equal(st.metaMembers, 3, `${what}: ${n.id} records 3 members`);
      const meta = st.groups.find((g) => g.groupId === 0)!;
      t.same(
        [...meta.voters, ...meta.learners].sort(),
        ['n1', 'n2', 'n3'],
        `${what}: ${n.id}'s meta group configuration is unchanged`,
      );
    }
  };

  /**
   * A 4th node with a valid client-API certificate but a peer certificate of another CA. It
   * trusts both peer CAs, so it accepts the members' certificates: any refusal is theirs.
   */
  const stranger = async (id: string, extra: (peerAddress: string) => string[]) => {
    const [api, peer] = [await freePort(host), await freePort(host)];
    const apiCert = apiCa.issue(id, [host]);
    const peerCert = otherCa.issue(id, [host]);
    const trust = join(dir, `${id}-trust.pem`);
    writeFileSync(trust, Buffer.concat([otherCa.pem, peerCa.pem]));
    const dataDir = join(dir, `${id}-data`);
    const args = [
      ...['--id', id, '--data-dir', dataDir, '--groups', '4', '--tick-ms', '20'],
      ...['--listen', `${host}:${api}`, '--peer-listen', `${host}:${peer}`],
      ...['--tls-cert', apiCert.cert, '--tls-key', apiCert.key, '--tls-client-ca', apiCa.cert],
      ...['--peer-tls-cert', peerCert.cert, '--peer-tls-key', peerCert.key, '--peer-tls-ca', trust],
      // The cluster's own admin token: any refusal is the certificate's.
      ...['--admin-token-file', cluster.tokenFile],
      ...extra(`${host}:${peer}`),
    ];
    // No --debug-listen: nothing here asks the stranger's internals (debug port unused).
    const node = new ProcNode(id, api, peer, dataDir, () => args, host, 0);
    t.teardown(async () => {
      await node.kill9();
      node.close();
    });
    return node;
  };

  await t.test('a node with another CA’s peer certificate cannot join', async (t) => {
    const x4 = await stranger('x4', () => ['--join', endpoint(n1)]);
    x4.start();
    const exit = await x4.exit!;
    t.equal(exit.code, 1, 'the joining process exits 1');
    t.match(
      x4.stderr,
      /tickraft: cannot start: PEER_TLS_UNVERIFIED: the node at peer address/,
      'with PEER_TLS_UNVERIFIED',
    );
    t.match(
      x4.stderr,
      /did not prove a certificate signed by this cluster's --peer-tls-ca/,
      'saying what it lacks',
    );
    const refusal = cluster.nodes.map((n) => n.stdout).join('');
    t.match(refusal, /"msg":"join refused: peer certificate not verified"/, 'the cluster logs it');
    await membersUnchanged(t, 'after the join');
  });

  await t.test('a node with another CA’s peer certificate cannot send Raft messages', async (t) => {
    const initial = cluster.nodes.map((n) => `${n.id}=${n.host}:${n.peerPort}`).join(',');
    const x5 = await stranger('x5', (self) => ['--initial-cluster', `${initial},x5=${self}`]);
    x5.start();
    // It dials every member with pre-votes and appends; every member refuses it at the handshake.
    for (const n of cluster.nodes) {
      await until(
        () => /"msg":"peer connection refused: its certificate is not signed/.test(n.stdout),
        () => `${n.id} has not refused x5 yet`,
        20_000,
      );
      const line = n.stdout
        .split('\n')
        .find((l) => l.includes('peer connection refused: its certificate'))!;
      t.match(
        JSON.parse(line) as Obj,
        { subject: /CN=x5/, issuer: /CN=other-ca/, reason: /\w+/, remote: /^127\./ },
        `${n.id} logs the refusal with the stranger's certificate`,
      );
      const metrics = await httpsGet(`https://${host}:${n.metricsPort}/metrics`, apiCa.pem);
      const refused = /tickraft_peer_connections_refused_total\{[^}]*\} (\d+)/.exec(metrics);
      t.ok(Number(refused?.[1] ?? 0) > 0, `${n.id} counts it (${refused?.[0] ?? 'none'})`);
    }
    // Its own line comes when its stream fails, which may be after the members logged theirs.
    await until(
      () => /"msg":"cannot connect to peer"/.test(x5.stdout),
      () => 'x5 has not logged its failed connections yet',
      20_000,
    ).catch(() => undefined);
    t.match(x5.stdout, /"msg":"cannot connect to peer"/, 'the stranger cannot connect');
    t.ok(x5.running, 'the stranger keeps trying');
    await membersUnchanged(t, 'after its attempts');
    await x5.kill9();
  });

  await t.test('SIGHUP reloads the API certificate; a bad file is refused', async (t) => {
    const presented = (): Promise<string> =>
      new Promise((resolve, reject) => {
        const s = connect({
          host,
          port: n1.apiPort,
          ca: apiCa.pem,
          cert: user.certPem,
          key: user.keyPem,
          ALPNProtocols: ['h2'],
        });
        s.once('secureConnect', () => {
          resolve(String(s.getPeerCertificate().subject.CN));
          s.destroy();
        });
        s.once('error', reject);
      });
    t.equal(await presented(), 'n1', 'n1 presents its first certificate');
    const files = apiFiles.get('n1')!;
    const renewed = apiCa.issue('n1-renewed', [host]);
    copyFileSync(renewed.cert, files.cert);
    copyFileSync(renewed.key, files.key);
    n1.proc!.kill('SIGHUP');
    await eventually(async () => {
      if ((await presented()) !== 'n1-renewed') throw new Error('old certificate still served');
    }, 10_000);
    // The log line may reach us a moment after the first handshake with the new certificate.
    await until(
      () => /"msg":"TLS files reloaded \(SIGHUP\)/.test(n1.stdout),
      () => `no reload logged: ${n1.stdout.slice(-2000)}`,
      10_000,
    );
    t.pass('the reload is logged');
    writeFileSync(files.key, 'not a key\n');
    n1.proc!.kill('SIGHUP');
    await until(
      () => n1.stdout.includes('TLS reload (SIGHUP) refused'),
      () => 'not refused yet',
      10_000,
    );
    t.match(n1.stdout, /"violations":\[\{"field":"--tls-key"/, 'naming the flag');
    t.equal(await presented(), 'n1-renewed', 'the node keeps serving the last good certificate');
    t.ok(n1.running, 'and keeps running');
    await client(n1).call('AdminService', 'ClusterStatus', {});
    t.pass('a new client connects after both reloads');
  });
});

function httpsGet(url: string, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { ca }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}
