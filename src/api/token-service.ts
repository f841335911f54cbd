/**
 * TokenService: API tokens live in the meta group, so every call runs on its leader (forwarded
 * there by the router). The leader makes the token, proposes only its hash, and answers with the
 * token once: no node, log entry or snapshot ever holds it.
 */
import type * as grpc from '@grpc/grpc-js';
import type { Clock } from '../base/clock.js';
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import { describePrincipal, isTokenRole, TOKEN_ROLES } from '../auth/principal.js';
import { hashToken, newTokenId, newTokenSecret, tokenHint } from '../auth/token-secret.js';
import type { TokenRecord } from '../auth/token-state.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { encodeMetaCommand, type MetaCommand, type MetaResult } from '../placement/meta-state.js';
import { NotLeaderError } from '../raft/errors.js';
import { formatInstant } from '../schedule/civil.js';
import type { ApiContext } from './api-context.js';
import type { Msg } from './convert.js';
import { TENANT_ID_PATTERN } from './job-spec.js';
import type { CallContext } from './router.js';
import { str, unary, type Handler } from './service-kit.js';

export const TOKEN_DESCRIPTION_MAX = 200;

export class TokenAdminError extends TickraftError {
  override readonly name = 'TokenAdminError';
}

export function tokenOut(t: TokenRecord): Msg {
  return {
    id: t.id,
    hint: t.hint,
    tenant: t.tenant,
    role: t.role,
    description: t.description,
    createdAtMs: t.createdAtMs,
    createdAt: formatInstant(t.createdAtMs),
    createdBy: t.createdBy,
  };
}

export function tokenServiceHandlers(
  api: ApiContext,
  clock: Clock,
): grpc.UntypedServiceImplementation {
  const node = api.node;
  const onMeta = <T>(ctx: CallContext, name: string, req: Msg, local: () => Promise<T>) =>
    api.onGroup(ctx, META_GROUP_ID, 'TokenService', name, req, local);
  const requireMetaLeader = (): void => {
    const g = node.host.groups.get(META_GROUP_ID);
    if (!g?.isLeader) throw new NotLeaderError(META_GROUP_ID, g?.leaderId ?? '');
  };
  const propose = async (c: MetaCommand): Promise<void> => {
    requireMetaLeader();
    const r = (await node.host.propose(META_GROUP_ID, encodeMetaCommand(c))) as MetaResult;
    if (!r.ok) throw new TokenAdminError(r.code, r.reason);
  };

  const handlers: Record<string, Handler> = {
    CreateToken: (req, ctx) => {
      const tenant = str(req, 'tenant');
      const role = str(req, 'role');
      const description = str(req, 'description');
      checkCreateToken(tenant, role, description);
      return onMeta(ctx, 'CreateToken', req, async () => {
        requireMetaLeader();
        await node.host.read(META_GROUP_ID);
        if (role !== 'admin' && !node.meta.tenants.has(tenant))
          throw new TokenAdminError('TENANT_NOT_FOUND', `tenant ${tenant} does not exist`);
        const token = newTokenSecret();
        const record: TokenRecord = {
          id: newTokenId(),
          hash: hashToken(token),
          hint: tokenHint(token),
          tenant,
          role: role as TokenRecord['role'],
          description,
          createdAtMs: clock.nowMs(),
          createdBy: ctx.principal === undefined ? 'node' : describePrincipal(ctx.principal),
        };
        await propose({ op: 'create-token', token: record });
        return { info: tokenOut(record), token };
      });
    },
    ListTokens: (req, ctx) => {
      const tenant = str(req, 'tenant');
      if (tenant !== '' && !TENANT_ID_PATTERN.test(tenant))
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'tenant', reason: 'is not a valid tenant id' },
        ]);
      return onMeta(ctx, 'ListTokens', req, async () => {
        requireMetaLeader();
        await node.host.read(META_GROUP_ID);
        const tokens = [...node.meta.tokens.values()]
          .filter((t) => tenant === '' || t.tenant === tenant)
          .sort((a, b) => a.createdAtMs - b.createdAtMs || (a.id < b.id ? -1 : 1));
        return { tokens: tokens.map(tokenOut) };
      });
    },
    RevokeToken: (req, ctx) => {
      const id = str(req, 'tokenId');
      if (!/^tok_[0-9a-f]{16}$/.test(id))
        throw new ValidationError('REQUEST_INVALID', [
          {
            field: 'tokenId',
            reason: 'must be a token id as ListTokens shows it (tok_ and 16 hex digits)',
          },
        ]);
      return onMeta(ctx, 'RevokeToken', req, async () => {
        await propose({ op: 'revoke-token', id });
        return {};
      });
    },
  };
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [
      name,
      unary(`TokenService.${name}`, fn, api.log),
    ]),
  );
}

/** CreateToken's fields, every violation at once. */
function checkCreateToken(tenant: string, role: string, description: string): void {
  const v: FieldViolation[] = [];
  if (!isTokenRole(role))
    v.push({ field: 'role', reason: `must be one of ${TOKEN_ROLES.join(', ')}` });
  else if (role === 'admin' && tenant !== '')
    v.push({
      field: 'tenant',
      reason: 'must be empty for an admin token (admin tokens act for every tenant)',
    });
  else if (role !== 'admin' && !TENANT_ID_PATTERN.test(tenant))
    v.push({
      field: 'tenant',
      reason: tenant === '' ? `is required for a ${role} token` : 'is not a valid tenant id',
    });
  if (description.length > TOKEN_DESCRIPTION_MAX)
    v.push({
      field: 'description',
      reason: `must be at most ${TOKEN_DESCRIPTION_MAX} characters`,
    });
  if (v.length > 0) throw new ValidationError('REQUEST_INVALID', v);
}
