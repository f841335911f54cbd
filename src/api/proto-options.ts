/**
 * How every server and client here reads proto/tickraft.proto: camelCase fields, int64 as JS
 * numbers (every int64 in the API is a millisecond time or a count far below 2^53), enums as their
 * names, defaults filled in, and proto3 `optional` fields left out when absent (so that "absent"
 * and "zero" stay distinguishable for validation). Its own module so that a client can read it
 * without loading @grpc/proto-loader.
 */
import type { Options } from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

export const API_LOADER_OPTIONS: Options & {
  readonly keepCase: boolean;
  readonly longs: typeof Number;
  readonly enums: typeof String;
  readonly defaults: boolean;
  readonly oneofs: boolean;
} = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: false,
  includeDirs: [PROTO_DIR],
};

/** The services of proto/tickraft.proto (package tickraft.v1) that clients call. */
export const PUBLIC_SERVICES = [
  'JobService',
  'RunService',
  'TenantService',
  'AdminService',
  'WorkerService',
  'TokenService',
] as const;

export type PublicServiceName = (typeof PUBLIC_SERVICES)[number];
