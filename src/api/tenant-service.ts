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
import type { LimitsChange, RetentionChange } from './tenant-admin.js';
import type { CallContext } from './router.js';
import { num, optNum, str, unary, type Handler } from './service-kit.js';

/** The fields of the request's sub-message `key` that are set; undefined when it sets none. */
function changeOf<K extends string>(
  req: Msg,
  key: string,
  fields: readonly K[],
): { [F in K]?: number | undefined } | undefined {
  const sub = req[key];
  if (sub === null || typeof sub !== 'object') return undefined;
  const change: { [F in K]?: number | undefined } = {};
  for (const f of fields) change[f] = optNum(sub as Msg, f);
  return Object.values(change).some((v) => v !== undefined) ? change : undefined;
}

const RETENTION_FIELDS = [
  'historyPerJob',
  'historyMaxAgeMs',
  'deadPerJob',
  'deadMaxAgeMs',
] as const;
const LIMIT_FIELDS = ['maxJobs', 'writesPerSecond', 'writeBurst', 'firesPerSecond'] as const;

const retentionChangeOf = (req: Msg): RetentionChange | undefined =>
  changeOf(req, 'retention', RETENTION_FIELDS);
const limitsChangeOf = (req: Msg): LimitsChange | undefined =>
  changeOf(req, 'limits', LIMIT_FIELDS);

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
          limits: limitsChangeOf(req),
        });
        return { tenant: tenantOut(r.tenant), signingSecret: r.secret };
      }),
    GetTenant: async (req, ctx) => {
      scopeTenant(ctx, str(req, 'tenantId'), 'tenantId');
      const tenant = await onMeta(ctx, 'GetTenant', req, async () =>
        tenantOut(await tenants.get(id(req))),
      );
      // Added where the call came in (a forwarded call answers without it): every node is asked.
      if (ctx.forwarded) return tenant;
      return { ...tenant, usage: await api.quota.usage(ctx, id(req)) };
    },
    UpdateTenant: (req, ctx) =>
      onMeta(ctx, 'UpdateTenant', req, async () =>
        tenantOut(
          await tenants.update(id(req), {
            inflightMax: optNum(req, 'inflightMax'),
            priorityWeight: optNum(req, 'priorityWeight'),
            retention: retentionChangeOf(req),
            limits: limitsChangeOf(req),
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
