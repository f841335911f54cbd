// The replicated token list: creates and revokes applied deterministically, retries idempotent,
// and a snapshot that carries tokens (hashes only) into a restored replica.
import t from 'tap';
import { hashToken, newTokenSecret, tokenHint } from '../../../src/auth/token-secret.js';
import type { TokenRecord } from '../../../src/auth/token-state.js';
import {
  encodeMetaCommand,
  MetaStateMachine,
  type MetaCommand,
} from '../../../src/placement/meta-state.js';

let index = 0;
function apply(sm: MetaStateMachine, c: MetaCommand): { ok: boolean; code?: string } {
  index++;
  return sm.apply({ term: 1, index, type: 'normal', data: encodeMetaCommand(c) } as never);
}

function record(token: string, over: Partial<TokenRecord> = {}): TokenRecord {
  return {
    id: 'tok_0123456789abcdef',
    hash: hashToken(token),
    hint: tokenHint(token),
    tenant: 'acme',
    role: 'writer',
    description: 'ci',
    createdAtMs: 1000,
    createdBy: 'admin (bootstrap)',
    ...over,
  };
}

t.test('create, look up by hash, revoke', (t) => {
  const sm = new MetaStateMachine();
  const token = newTokenSecret();
  t.match(token, /^tkr_[A-Za-z0-9_-]{43}$/, '256 random bits, base64url');
  t.same(
    apply(sm, { op: 'create-token', token: record(token) }),
    {
      ok: false,
      code: 'TENANT_NOT_FOUND',
      reason: 'tenant acme does not exist',
    },
    'a tenant token needs its tenant',
  );
  apply(sm, {
    op: 'create-tenant',
    tenant: {
      id: 'acme',
      signingSecrets: ['whsec_x'],
      inflightMax: 1,
      updatedAtMs: 1,
      priorityWeight: 1,
    },
  });
  t.same(apply(sm, { op: 'create-token', token: record(token) }), { ok: true });
  t.equal(sm.tokensByHash.get(hashToken(token))?.id, 'tok_0123456789abcdef');
  t.same(
    apply(sm, { op: 'create-token', token: record(token) }),
    { ok: true },
    'a retried create succeeds again',
  );
  t.equal(sm.tokens.size, 1, 'and adds nothing');
  const other = newTokenSecret();
  t.equal(
    apply(sm, { op: 'create-token', token: record(other) }).code,
    'TOKEN_ALREADY_EXISTS',
    'an id is never reused for another token',
  );
  t.equal(
    apply(sm, { op: 'create-token', token: record(token, { id: 'tok_fedcba9876543210' }) }).code,
    'TOKEN_ALREADY_EXISTS',
    'nor is a token issued twice',
  );
  t.same(
    apply(sm, {
      op: 'create-token',
      token: record(other, { id: 'tok_1', role: 'admin', tenant: '' }),
    }),
    { ok: true },
    'an admin token needs no tenant',
  );
  t.same(apply(sm, { op: 'revoke-token', id: 'tok_0123456789abcdef' }), { ok: true });
  t.equal(
    sm.tokensByHash.get(hashToken(token)),
    undefined,
    'a revoked token is gone from the lookup',
  );
  t.equal(apply(sm, { op: 'revoke-token', id: 'tok_0123456789abcdef' }).code, 'TOKEN_NOT_FOUND');
  t.end();
});

t.test('snapshots carry the tokens, never a secret', (t) => {
  const sm = new MetaStateMachine();
  const token = newTokenSecret();
  apply(sm, { op: 'create-token', token: record(token, { role: 'admin', tenant: '' }) });
  const snap = sm.snapshot();
  t.notOk(
    Buffer.from(snap).toString('utf8').includes(token),
    'the token itself is not in the snapshot',
  );
  const restored = new MetaStateMachine();
  restored.restore(snap);
  t.equal(restored.tokensByHash.get(hashToken(token))?.role, 'admin');
  t.same(restored.snapshot(), snap, 'restore then snapshot gives the same bytes');
  t.end();
});
