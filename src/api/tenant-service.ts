/**
 * TenantService: tenants live in the meta group, so every call is routed to its leader.
 */
import type * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../base/errors.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import type { ApiContext } from './api-context.js';
import { tenantOut, type Msg } from './convert.js';
import { requireTenantId } from './job-service.js';
import { decodePageToken, encodePageToken, pageSizeOf } from './pagination.js';
import { scopeTenant } from './tenant-scope.js';
import type { RetentionChange } from './tenant-admin.js';
import type { CallContext } from './router.js';
import { num, optNum, str, unary, type Handler } from './service-kit.js';

/** The request's `retention` fields that are set; undefined when it sets none. */
function retentionChangeOf(req: Msg): RetentionChange | undefined {
  const r = req['retention'];
  if (r === null || typeof r !== 'object') return undefined;
  const m = r as Msg;
  const change: RetentionChange = {
    historyPerJob: optNum(m, 'historyPerJob'),
    historyMaxAgeMs: optNum(m, 'historyMaxAgeMs'),
    deadPerJob: optNum(m, 'deadPerJob'),
    deadMaxAgeMs: optNum(m, 'deadMaxAgeMs'),
  };
  return Object.values(change).some((v) => v !== undefined) ? change : undefined;
}

export function tenantServiceHandlers(api: ApiContext): grpc.UntypedServiceImplementation {
  const { tenants } = api;
  const onMeta = <T>(ctx: CallContext, name: string, req: Msg, local: () => Promise<T>) =>
    api.onGroup(ctx, META_GROUP_ID, 'TenantService', name, req, local);
  const id = (req: Msg): string => {
    const tenantId = str(req, 'tenantId');
    requireTenantId(tenantId, 'tenantId');
    return tenantId;
  };

  const handlers: Record<string, Handler> = {
    CreateTenant: (req, ctx) =>
      onMeta(ctx, 'CreateTenant', req, async () => {
        const r = await tenants.create({
          id: str(req, 'tenantId'),
          secret: str(req, 'signingSecret'),
          inflightMax: optNum(req, 'inflightMax'),
          priorityWeight: optNum(req, 'priorityWeight'),
          retention: retentionChangeOf(req),
        });
        return { tenant: tenantOut(r.tenant), signingSecret: r.secret };
      }),
    GetTenant: (req, ctx) => {
      scopeTenant(ctx, str(req, 'tenantId'), 'tenantId');
      return onMeta(ctx, 'GetTenant', req, async () => tenantOut(await tenants.get(id(req))));
    },
    UpdateTenant: (req, ctx) =>
      onMeta(ctx, 'UpdateTenant', req, async () =>
        tenantOut(
          await tenants.update(id(req), {
            inflightMax: optNum(req, 'inflightMax'),
            priorityWeight: optNum(req, 'priorityWeight'),
            retention: retentionChangeOf(req),
          }),
        ),
      ),
    RotateSecret: (req, ctx) =>
      onMeta(ctx, 'RotateSecret', req, async () => {
        const r = await tenants.rotate(
          id(req),
          str(req, 'newSecret'),
          optNum(req, 'gracePeriodMs'),
        );
        return { tenant: tenantOut(r.tenant), newSecret: r.secret };
      }),
    ListTenants: (req, ctx) => {
      const pageSize = pageSizeOf(num(req, 'pageSize'));
      const after = decodePageToken('tenants', '', str(req, 'pageToken'));
      if (after !== undefined && typeof after !== 'string')
        throw new ValidationError('REQUEST_INVALID', [
          { field: 'pageToken', reason: 'is not a page token of ListTenants' },
        ]);
      return onMeta(ctx, 'ListTenants', req, async () => {
        const r = await tenants.list(after ?? '', pageSize);
        const last = r.tenants[r.tenants.length - 1];
        return {
          tenants: r.tenants.map(tenantOut),
          nextPageToken: r.more && last ? encodePageToken('tenants', '', last.id) : '',
        };
      });
    },
  };
  return Object.fromEntries(
    Object.entries(handlers).map(([name, fn]) => [
      name,
      unary(`TenantService.${name}`, fn, api.log),
    ]),
  );
}
