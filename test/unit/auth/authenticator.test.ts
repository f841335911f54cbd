// The authenticator on its own: the bootstrap token, stored tokens, what is refused and with
// which code, and the freshness rule that bounds how long a revoked token can still pass.
import t from 'tap';
import { Authenticator, TOKEN_FRESH_MS } from '../../../src/auth/authenticator.js';
import { hashToken, newTokenSecret, tokenHint } from '../../../src/auth/token-secret.js';
import type { TokenRecord } from '../../../src/auth/token-state.js';
import type { Clock } from '../../../src/base/clock.js';

const ADMIN = 'a'.repeat(64);

/** A live view by id of the tokens by hash, as the meta state keeps both. */
function byId(tokens: Map<string, TokenRecord>): ReadonlyMap<string, TokenRecord> {
  return {
    has: (id: string) => [...tokens.values()].some((t) => t.id === id),
  } as unknown as ReadonlyMap<string, TokenRecord>;
}

function setup(): {
  auth: Authenticator;
  tokens: Map<string, TokenRecord>;
  clock: Clock & { ms: number };
  confirms: { n: number; fail: boolean };
} {
  const tokens = new Map<string, TokenRecord>();
  const clock = { ms: 0, nowMs: () => 0, monotonicMs: () => clock.ms };
  const confirms = { n: 0, fail: false };
  const auth = new Authenticator({
    adminTokenHash: hashToken(ADMIN),
    tokensByHash: tokens,
    tokensById: byId(tokens),
    confirmMeta: () => {
      confirms.n++;
      return confirms.fail ? Promise.reject(new Error('no meta leader')) : Promise.resolve();
    },
    clock,
  });
  return { auth, tokens, clock, confirms };
}

function store(
  tokens: Map<string, TokenRecord>,
  role: TokenRecord['role'],
  tenant = 'acme',
): string {
  const token = newTokenSecret();
  tokens.set(hashToken(token), {
    id: 'tok_0000000000000001',
    hash: hashToken(token),
    hint: tokenHint(token),
    tenant,
    role,
    description: '',
    createdAtMs: 0,
    createdBy: 'test',
  });
  return token;
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'OK',
    (err: unknown) => (err as { code: string }).code,
  );
}

t.test('who is who', async (t) => {
  const { auth, tokens } = setup();
  t.same(await auth.authenticate([`Bearer ${ADMIN}`]), { kind: 'admin', tokenId: 'bootstrap' });
  t.same(
    await auth.authenticate([`bearer   ${ADMIN}`]),
    { kind: 'admin', tokenId: 'bootstrap' },
    'the scheme is case-insensitive',
  );
  const writer = store(tokens, 'writer');
  t.same(await auth.authenticate([`Bearer ${writer}`]), {
    kind: 'tenant',
    tenant: 'acme',
    role: 'writer',
    tokenId: 'tok_0000000000000001',
  });
  t.equal(await codeOf(auth.authenticate([])), 'AUTH_MISSING');
  t.equal(await codeOf(auth.authenticate([ADMIN])), 'AUTH_MALFORMED', 'no scheme');
  t.equal(await codeOf(auth.authenticate([`Basic ${ADMIN}`])), 'AUTH_MALFORMED', 'another scheme');
  t.equal(
    await codeOf(auth.authenticate([`Bearer ${ADMIN}`, `Bearer ${ADMIN}`])),
    'AUTH_MALFORMED',
    'two headers',
  );
  t.equal(await codeOf(auth.authenticate(['Bearer '])), 'AUTH_MALFORMED', 'an empty token');
  t.equal(await codeOf(auth.authenticate([`Bearer ${ADMIN}x`])), 'AUTH_UNKNOWN_TOKEN');
  t.equal(await codeOf(auth.authenticate([`Bearer ${newTokenSecret()}`])), 'AUTH_UNKNOWN_TOKEN');
});

t.test('a stored token passes only on a meta state confirmed recently', async (t) => {
  const { auth, tokens, clock, confirms } = setup();
  const reader = store(tokens, 'reader');
  await auth.authenticate([`Bearer ${reader}`]);
  t.equal(confirms.n, 1, 'the first call confirms the meta state');
  clock.ms = TOKEN_FRESH_MS / 2 - 1;
  await auth.authenticate([`Bearer ${reader}`]);
  t.equal(confirms.n, 1, 'a fresh confirmation is reused');
  clock.ms = TOKEN_FRESH_MS - 1;
  await auth.authenticate([`Bearer ${reader}`]);
  t.equal(confirms.n, 2, 'past half its age, it is renewed in the background');
  await new Promise((resolve) => setImmediate(resolve));
  clock.ms = 3 * TOKEN_FRESH_MS;
  confirms.fail = true;
  t.equal(
    await codeOf(auth.authenticate([`Bearer ${reader}`])),
    'AUTH_UNAVAILABLE',
    'a node that cannot confirm refuses rather than trusting a list that may be stale',
  );
  t.same(
    await auth.authenticate([`Bearer ${ADMIN}`]),
    { kind: 'admin', tokenId: 'bootstrap' },
    'the bootstrap token still works: it is what repairs a cluster whose meta group is down',
  );
  confirms.fail = false;
  clock.ms = 4 * TOKEN_FRESH_MS;
  tokens.clear();
  t.equal(await codeOf(auth.authenticate([`Bearer ${reader}`])), 'AUTH_UNKNOWN_TOKEN', 'revoked');
});

t.test('without an admin token every call is the no-auth admin', async (t) => {
  const auth = new Authenticator({
    adminTokenHash: undefined,
    tokensByHash: new Map(),
    tokensById: new Map(),
    confirmMeta: () => Promise.resolve(),
    clock: { nowMs: () => 0, monotonicMs: () => 0 },
  });
  t.same(await auth.authenticate([]), { kind: 'admin', tokenId: 'no-auth' });
});
