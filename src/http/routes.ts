/**
 * The HTTP/JSON API's route table: one row per public RPC (docs/HTTP.md), in the style of
 * grpc-gateway and Google's API design guide: resources under `/v1`, a tenant's jobs and runs
 * under `/v1/tenants/{tenant}`, actions that are not create/read/update/delete as custom verbs
 * (`POST …/jobs/{job}:pause`), the cluster's operations under `/v1/admin`. The server
 * (http-api-server.ts), the OpenAPI document (openapi.ts) and the tests all read this table, so
 * a path exists exactly when it is here.
 *
 * WorkerService.Work has no row: it is a bidirectional stream (leases one way, renewals and
 * completions the other), which a request and its response cannot carry. Workers speak gRPC.
 */
import type { PublicServiceName } from '../api/proto-options.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface HttpRoute {
  readonly method: HttpMethod;
  /**
   * Literal segments and `{name}` variables, each a whole segment, then optionally `:verb` after
   * the last segment (a custom method).
   */
  readonly path: string;
  readonly service: PublicServiceName;
  /** The RPC of `service` the request becomes. */
  readonly rpc: string;
  /**
   * Each path variable → the request fields it sets (camelCase field paths; `jobs[].spec.tenant`
   * sets it in every element of `jobs`). A field given in the body or query too must be equal.
   */
  readonly bind: Readonly<Record<string, readonly string[]>>;
  /**
   * Where the rest of the request comes from: the JSON body (POST, PUT, PATCH) or the query
   * string (GET, DELETE).
   */
  readonly rest: 'body' | 'query';
  /** Largest body accepted, in bytes (DEFAULT_BODY_LIMIT when absent). */
  readonly maxBodyBytes?: number;
}

/** Bodies of every route but CreateJobs: a job with a 64 KiB payload, escaped, fits many times. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/**
 * CreateJobs carries up to 1000 jobs. Its JSON is larger than the protobuf message it becomes,
 * and the gRPC API takes messages of at most 4 MiB: a body within this limit always fits.
 */
export const CREATE_JOBS_BODY_LIMIT = 4 * 1024 * 1024;

/** Where the OpenAPI document is served (no token needed: it describes, it holds nothing). */
export const OPENAPI_PATH = '/v1/openapi.json';

const T = '/v1/tenants/{tenant}';
const JOB = `${T}/jobs/{job}`;
const RUN = `${T}/runs/{fire_id}`;
const tenant = { tenant: ['tenant'] } as const;
const job = { tenant: ['tenant'], job: ['jobId'] } as const;
const run = { tenant: ['tenant'], fire_id: ['fireId'] } as const;

export const ROUTES: readonly HttpRoute[] = [
  // JobService
  {
    method: 'POST',
    path: `${T}/jobs`,
    service: 'JobService',
    rpc: 'CreateJob',
    bind: { tenant: ['spec.tenant'] },
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${T}/jobs:batchCreate`,
    service: 'JobService',
    rpc: 'CreateJobs',
    bind: { tenant: ['jobs[].spec.tenant'] },
    rest: 'body',
    maxBodyBytes: CREATE_JOBS_BODY_LIMIT,
  },
  {
    method: 'GET',
    path: `${T}/jobs`,
    service: 'JobService',
    rpc: 'ListJobs',
    bind: tenant,
    rest: 'query',
  },
  { method: 'GET', path: JOB, service: 'JobService', rpc: 'GetJob', bind: job, rest: 'query' },
  { method: 'PUT', path: JOB, service: 'JobService', rpc: 'UpdateJob', bind: job, rest: 'body' },
  {
    method: 'DELETE',
    path: JOB,
    service: 'JobService',
    rpc: 'DeleteJob',
    bind: job,
    rest: 'query',
  },
  {
    method: 'POST',
    path: `${JOB}:pause`,
    service: 'JobService',
    rpc: 'PauseJob',
    bind: job,
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${JOB}:resume`,
    service: 'JobService',
    rpc: 'ResumeJob',
    bind: job,
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${JOB}:trigger`,
    service: 'JobService',
    rpc: 'TriggerJob',
    bind: job,
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${JOB}:backfill`,
    service: 'JobService',
    rpc: 'BackfillJob',
    bind: job,
    rest: 'body',
  },
  {
    method: 'POST',
    path: '/v1/schedules:preview',
    service: 'JobService',
    rpc: 'PreviewSchedule',
    bind: {},
    rest: 'body',
  },
  // RunService
  {
    method: 'GET',
    path: `${JOB}/runs`,
    service: 'RunService',
    rpc: 'ListRuns',
    bind: job,
    rest: 'query',
  },
  {
    method: 'GET',
    path: `${JOB}/runs:watch`,
    service: 'RunService',
    rpc: 'WatchRuns',
    bind: job,
    rest: 'query',
  },
  { method: 'GET', path: RUN, service: 'RunService', rpc: 'GetRun', bind: run, rest: 'query' },
  {
    method: 'GET',
    path: `${RUN}/output`,
    service: 'RunService',
    rpc: 'GetRunOutput',
    bind: run,
    rest: 'query',
  },
  {
    method: 'POST',
    path: `${RUN}:replay`,
    service: 'RunService',
    rpc: 'ReplayRun',
    bind: run,
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${RUN}:complete`,
    service: 'RunService',
    rpc: 'CompleteRun',
    bind: run,
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${RUN}:heartbeat`,
    service: 'RunService',
    rpc: 'Heartbeat',
    bind: run,
    rest: 'body',
  },
  {
    method: 'GET',
    path: `${T}/dead-runs`,
    service: 'RunService',
    rpc: 'ListDeadRuns',
    bind: tenant,
    rest: 'query',
  },
  {
    method: 'POST',
    path: `${T}/dead-runs:purge`,
    service: 'RunService',
    rpc: 'PurgeDeadRuns',
    bind: tenant,
    rest: 'body',
  },
  // TenantService
  {
    method: 'POST',
    path: '/v1/tenants',
    service: 'TenantService',
    rpc: 'CreateTenant',
    bind: {},
    rest: 'body',
  },
  {
    method: 'GET',
    path: '/v1/tenants',
    service: 'TenantService',
    rpc: 'ListTenants',
    bind: {},
    rest: 'query',
  },
  {
    method: 'GET',
    path: T,
    service: 'TenantService',
    rpc: 'GetTenant',
    bind: { tenant: ['tenantId'] },
    rest: 'query',
  },
  {
    // PATCH: fields left out keep their value.
    method: 'PATCH',
    path: T,
    service: 'TenantService',
    rpc: 'UpdateTenant',
    bind: { tenant: ['tenantId'] },
    rest: 'body',
  },
  {
    method: 'POST',
    path: `${T}:rotateSecret`,
    service: 'TenantService',
    rpc: 'RotateSecret',
    bind: { tenant: ['tenantId'] },
    rest: 'body',
  },
  // TokenService
  {
    method: 'POST',
    path: '/v1/tokens',
    service: 'TokenService',
    rpc: 'CreateToken',
    bind: {},
    rest: 'body',
  },
  {
    method: 'GET',
    path: '/v1/tokens',
    service: 'TokenService',
    rpc: 'ListTokens',
    bind: {},
    rest: 'query',
  },
  {
    method: 'DELETE',
    path: '/v1/tokens/{token_id}',
    service: 'TokenService',
    rpc: 'RevokeToken',
    bind: { token_id: ['tokenId'] },
    rest: 'query',
  },
  // AdminService
  {
    method: 'GET',
    path: '/v1/admin/cluster',
    service: 'AdminService',
    rpc: 'ClusterStatus',
    bind: {},
    rest: 'query',
  },
  {
    method: 'POST',
    path: '/v1/admin/cluster:rebalance',
    service: 'AdminService',
    rpc: 'Rebalance',
    bind: {},
    rest: 'body',
  },
  {
    method: 'POST',
    path: '/v1/admin/nodes',
    service: 'AdminService',
    rpc: 'AddNode',
    bind: {},
    rest: 'body',
  },
  ...(['drain', 'undrain', 'remove'] as const).map((verb): HttpRoute => ({
    method: 'POST',
    path: `/v1/admin/nodes/{node_id}:${verb}`,
    service: 'AdminService',
    rpc: { drain: 'DrainNode', undrain: 'UndrainNode', remove: 'RemoveNode' }[verb],
    bind: { node_id: ['nodeId'] },
    rest: 'body',
  })),
  ...(['transferLeader', 'moveReplica', 'split'] as const).map((verb): HttpRoute => ({
    method: 'POST',
    path: `/v1/admin/groups/{group_id}:${verb}`,
    service: 'AdminService',
    rpc: { transferLeader: 'TransferLeader', moveReplica: 'MoveReplica', split: 'SplitGroup' }[
      verb
    ],
    bind: { group_id: ['groupId'] },
    rest: 'body',
  })),
  ...(['pause', 'resume', 'cancel'] as const).map((verb): HttpRoute => ({
    method: 'POST',
    path: `/v1/admin/tenants/{tenant}/jobs:${verb}`,
    service: 'AdminService',
    rpc: { pause: 'BulkPause', resume: 'BulkResume', cancel: 'BulkCancel' }[verb],
    bind: tenant,
    rest: 'body',
  })),
];

/** The RPCs of the public services that have no route, and why. */
export const UNROUTED_RPCS: Readonly<Record<string, string>> = {
  'WorkerService.Work':
    'a bidirectional stream (leases to the worker, renewals and completions back): workers use gRPC',
};
