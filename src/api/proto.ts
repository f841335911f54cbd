/**
 * Loads the public API (proto/tickraft.proto) and the node-to-node service behind it
 * (proto/tickraft_internal.proto) once, with the options every server and client here shares:
 * camelCase fields, int64 as JS numbers (every int64 in the API is a millisecond time or a count
 * far below 2^53), enums as their names, defaults filled in, and proto3 `optional` fields left
 * out when absent (so that "absent" and "zero" stay distinguishable for validation).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

export const API_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: false,
  includeDirs: [PROTO_DIR],
};

export type PublicServiceName =
  'JobService' | 'RunService' | 'TenantService' | 'AdminService' | 'WorkerService';

export interface ApiServices {
  readonly JobService: grpc.ServiceClientConstructor;
  readonly RunService: grpc.ServiceClientConstructor;
  readonly TenantService: grpc.ServiceClientConstructor;
  readonly AdminService: grpc.ServiceClientConstructor;
  readonly WorkerService: grpc.ServiceClientConstructor;
  readonly NodeService: grpc.ServiceClientConstructor;
}

let loaded: ApiServices | undefined;

export function loadApiServices(): ApiServices {
  if (loaded) return loaded;
  const def = protoLoader.loadSync(
    ['tickraft.proto', 'tickraft_internal.proto'],
    API_LOADER_OPTIONS,
  );
  // loadPackageDefinition's result is untyped nesting by package name.
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    tickraft: {
      v1: Record<PublicServiceName, grpc.ServiceClientConstructor>;
      internal: { v1: { NodeService: grpc.ServiceClientConstructor } };
    };
  };
  const v1 = pkg.tickraft.v1;
  loaded = {
    JobService: v1.JobService,
    RunService: v1.RunService,
    TenantService: v1.TenantService,
    AdminService: v1.AdminService,
    WorkerService: v1.WorkerService,
    NodeService: pkg.tickraft.internal.v1.NodeService,
  };
  return loaded;
}
