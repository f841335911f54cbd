// Tokens as an operator and a tenant meet them, on a real 3-node cluster: tickctl creates a
// tenant's tokens (shown once), lists them (hints only), and revokes one; every node refuses
// the revoked token within 5 s; calls without a token, with a malformed or an unknown one are
// UNAUTHENTICATED; admin operations are in the audit log; and a node refuses to start without
// an admin token file unless told --insecure-no-auth, which it then says at start.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiCallError, ApiClient } from '../../src/api/client.js';
import { REVOCATION_BOUND_MS } from '../../src/auth/authenticator.js';
import { ApiCluster, endpointOf, TENANT } from '../helpers/api-cluster.js';
import { eventually, freePort, randomLoopbackHost, sleep } from '../helpers/cluster.js';
import { runTickctl, TICKRAFT } from '../helpers/tickctl.js';

type Obj = Record<string, unknown>;

async function statusOf(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'OK',
    (err: unknown) =>
      err instanceof ApiCallError ? (grpc.status[err.status] ?? String(err.status)) : String(err),
  );
}

t.test('tokens: create, use, list, revoke everywhere within 5 s', async (t) => {
  const ac = await ApiCluster.start(t, { groups: 2 });
  const nodes = ac.cluster.nodes;
  const endpoint = endpointOf(nodes[0]!);
  const tokenOf = (out: string): string =>
    /token \(shown once; store it now\): (\S+)/.exec(out)?.[1] ?? '';

  const made = await runTickctl([
    'tokens',
    'create',
    '--tenant',
    TENANT,
    '--role',
    'writer',
    '--description',
    'ci deploys',
    '--endpoint',
    endpoint,
  ]);
  t.equal(made.code, 0, made.stderr);
  const writer = tokenOf(made.stdout);
  t.match(writer, /^tkr_[A-Za-z0-9_-]{43}$/, 'the token is printed once');
  const reader = tokenOf(
    (
      await runTickctl([
        'tokens',
        'create',
        '--tenant',
        TENANT,
        '--role',
        'reader',
        '--endpoint',
        endpoint,
      ])
    ).stdout,
  );

  const listed = await runTickctl(['tokens', 'list', '--json', '--endpoint', endpoint]);
  t.equal(listed.code, 0, listed.stderr);
  t.notOk(
    listed.stdout.includes(writer) || listed.stdout.includes(reader),
    'a listing never shows a token',
  );
  const infos = (JSON.parse(listed.stdout) as { tokens: Obj[] }).tokens;
  t.same(
    infos.map((i) => [i['tenant'], i['role'], i['description'], i['createdBy']]),
    [
      [TENANT, 'writer', 'ci deploys', 'admin (bootstrap)'],
      [TENANT, 'reader', '', 'admin (bootstrap)'],
    ],
  );
  t.equal(infos[0]!['hint'], `${writer.slice(0, 10)}…`, 'the hint is the first characters');
  const writerId = String(infos[0]!['id']);

  // The writer creates a job through one node and reads it through each.
  const asWriter = nodes.map((n) => new ApiClient(endpointOf(n), 5000, {}, { token: writer }));
  t.teardown(() => asWriter.forEach((c) => c.close()));
  await asWriter[1]!.call('JobService', 'CreateJob', {
    jobId: 'nightly',
    spec: ac.spec({ schedule: 'every 1h' }),
  });
  for (const c of asWriter)
    t.equal(
      await statusOf(c.call('JobService', 'GetJob', { jobId: 'nightly', tenant: TENANT })),
      'OK',
    );
  const asReader = new ApiClient(endpoint, 5000, {}, { token: reader });
  t.teardown(() => asReader.close());
  t.equal(
    await statusOf(asReader.call('JobService', 'DeleteJob', { jobId: 'nightly', tenant: TENANT })),
    'PERMISSION_DENIED',
    'a reader cannot delete',
  );
  t.equal(
    await statusOf(asReader.call('JobService', 'GetJob', { jobId: 'nightly', tenant: TENANT })),
    'OK',
    'but can read',
  );

  // Strangers.
  const stranger = (token?: string): ApiClient => new ApiClient(endpoint, 5000, {}, { token });
  for (const [what, c] of [
    ['no token', stranger()],
    ['an unknown token', stranger(`tkr_${'A'.repeat(43)}`)],
    ['a malformed token', stranger('not a token')],
  ] as const) {
    t.equal(
      await statusOf(c.call('JobService', 'GetJob', { jobId: 'nightly', tenant: TENANT })),
      'UNAUTHENTICATED',
      what,
    );
    c.close();
  }

  // Revoke through n3; from the answer on, every node must refuse within the bound.
  const revoked = await runTickctl([
    'tokens',
    'revoke',
    writerId,
    '--endpoint',
    endpointOf(nodes[2]!),
  ]);
  t.equal(revoked.code, 0, revoked.stderr);
  const at = Date.now();
  const refusedAfter: number[] = [];
  await Promise.all(
    asWriter.map(async (c, i) => {
      for (;;) {
        const s = await statusOf(
          c.call('JobService', 'GetJob', { jobId: 'nightly', tenant: TENANT }),
        );
        if (s === 'UNAUTHENTICATED') {
          refusedAfter[i] = Date.now() - at;
          return;
        }
        if (Date.now() - at > 2 * REVOCATION_BOUND_MS)
          throw new Error(`n${i + 1} still accepts the revoked token (${s})`);
        await sleep(50);
      }
    }),
  );
  t.comment(`revoked token refused after ${refusedAfter.join(' / ')} ms on n1 / n2 / n3`);
  t.ok(
    Math.max(...refusedAfter) <= REVOCATION_BOUND_MS,
    `every node refuses within ${REVOCATION_BOUND_MS} ms`,
  );
  t.equal(
    (await runTickctl(['tokens', 'revoke', writerId, '--endpoint', endpoint])).code,
    3,
    'revoking it again: not found',
  );
  const denied = await runTickctl(['tokens', 'list', '--endpoint', endpoint], {
    env: { ...process.env, TICKRAFT_TOKEN: reader },
  });
  t.equal(denied.code, 6, 'a tenant token cannot list tokens: exit 6');
  t.match(denied.stderr, /not allowed: TokenService\.ListTokens needs an admin token/);
  const noToken = await runTickctl(['tokens', 'list', '--endpoint', endpoint], {
    env: { ...process.env, TICKRAFT_TOKEN: '', TICKRAFT_HOME: ac.cluster.root + '/none' },
  });
  t.equal(noToken.code, 6);
  t.match(noToken.stderr, /refused the credentials: no credentials.*--token-file/);
  const badFile = await runTickctl([
    'tokens',
    'list',
    '--token-file',
    '/nonexistent/token',
    '--endpoint',
    endpoint,
  ]);
  t.equal(badFile.code, 2, 'an unreadable --token-file is a usage error');
  t.match(badFile.stderr, /--token-file: cannot read \/nonexistent\/token/);

  // The audit log: admin operations with the principal and the outcome.
  await eventually(() => {
    const audit = nodes
      .flatMap((n) => n.stdout.split('\n'))
      .filter((l) => l.includes('"audit":true'))
      .map((l) => JSON.parse(l) as Obj);
    const revokes = audit.filter((a) => a['method'] === 'TokenService.RevokeToken');
    if (!revokes.some((a) => a['outcome'] === 'OK' && a['principal'] === 'admin (bootstrap)'))
      throw new Error('no audit record of the revocation');
    if (!revokes.some((a) => a['outcome'] === 'TOKEN_NOT_FOUND'))
      throw new Error('no audit record of the failed revocation');
    if (
      !audit.some(
        (a) =>
          a['method'] === 'TokenService.ListTokens' &&
          a['outcome'] === 'PERMISSION_DENIED' &&
          String(a['principal']).startsWith(`${TENANT}/reader`),
      )
    )
      throw new Error('no audit record of the refused listing');
    return Promise.resolve();
  }, 10_000);
});

t.test('a node needs an admin token file, or says loudly that it has none', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tickraft-auth-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const serve = (args: string[], waitFor?: RegExp): Promise<{ code: number | null; out: string }> =>
    new Promise((resolve) => {
      const child = spawn(
        process.execPath,
        [TICKRAFT, 'serve', '--id', 'n1', '--data-dir', join(dir, 'd'), ...args],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      const take = (d: Buffer): void => {
        out += d.toString();
        if (waitFor?.test(out)) child.kill('SIGTERM');
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      child.on('close', (code) => resolve({ code, out }));
    });
  const none = await serve([]);
  t.equal(none.code, 2, 'no token file: exit 2');
  t.match(none.out, /--admin-token-file: is required/);
  const short = join(dir, 'short.token');
  writeFileSync(short, 'abc\n', { mode: 0o600 });
  const weak = await serve(['--admin-token-file', short]);
  t.equal(weak.code, 2, 'a guessable token: exit 2');
  t.match(weak.out, /--admin-token-file: the token in .* has 3 characters; at least 32/);
  const both = await serve(['--admin-token-file', short, '--insecure-no-auth']);
  t.equal(both.code, 2);
  t.match(both.out, /--insecure-no-auth: cannot be given with --admin-token-file/);
  const host = randomLoopbackHost();
  const peer = await freePort(host);
  const insecure = await serve(
    [
      '--insecure-no-auth',
      '--listen',
      `${host}:${await freePort(host)}`,
      '--peer-listen',
      `${host}:${peer}`,
      '--initial-cluster',
      `n1=${host}:${peer}`,
    ],
    /"msg":"serving"/,
  );
  t.match(insecure.out, /AUTHENTICATION IS OFF \(--insecure-no-auth\)/, 'said at start');
});
