/**
 * Loads the public API (proto/tickraft.proto) and the node-to-node service behind it
 * (proto/tickraft_internal.proto) once, through @grpc/proto-loader with the options every server
 * and client here shares (src/api/proto-options.ts). Servers use these definitions; clients use
 * src/api/client-proto.ts, which decodes alike without proto-loader's start-up cost.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { API_LOADER_OPTIONS, type PublicServiceName } from './proto-options.js';

export interface ApiServices {
  readonly JobService: grpc.ServiceClientConstructor;
  readonly RunService: grpc.ServiceClientConstructor;
  readonly TenantService: grpc.ServiceClientConstructor;
  readonly AdminService: grpc.ServiceClientConstructor;
  readonly WorkerService: grpc.ServiceClientConstructor;
  readonly TokenService: grpc.ServiceClientConstructor;
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
    TokenService: v1.TokenService,
    NodeService: pkg.tickraft.internal.v1.NodeService,
  };
  return loaded;
}
