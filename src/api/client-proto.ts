/**
 * The public services as a client needs them: for each method its path and the functions that
 * encode a request and decode a response, with the same protobufjs calls and options as the
 * servers' definitions (src/api/proto.ts, through @grpc/proto-loader), so both ends read a message
 * alike (test/unit/api/client-proto.test.ts compares them method by method).
 *
 * Why not proto-loader here: a client never serves reflection, yet proto-loader builds a file
 * descriptor for every type and loads protobufjs' common protos on import, and parses the .proto
 * text at each start. That was most of a one-call tickctl's start-up. Here the bundle built by
 * scripts/build.ts carries proto/tickraft.proto already parsed (as protobufjs JSON, in
 * TICKRAFT_API_PROTO_JSON); run from the sources, the file is parsed at first use.
 */
import * as grpc from '@grpc/grpc-js';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
// protobufjs is CommonJS whose exports Node cannot list statically: its default export is the module.
import protobuf from 'protobufjs/light.js';
import { API_LOADER_OPTIONS, PUBLIC_SERVICES, type PublicServiceName } from './proto-options.js';

/** Set by scripts/build.ts (esbuild `define`) to proto/tickraft.proto parsed; absent in sources. */
declare const TICKRAFT_API_PROTO_JSON: string | undefined;

const API_PROTO = fileURLToPath(new URL('../../proto/tickraft.proto', import.meta.url));
const PACKAGE = 'tickraft.v1';

/** What toObject is given: the loader options that shape a decoded message. */
const TO_OBJECT: protobuf.IConversionOptions = {
  longs: API_LOADER_OPTIONS.longs,
  enums: API_LOADER_OPTIONS.enums,
  defaults: API_LOADER_OPTIONS.defaults,
  oneofs: API_LOADER_OPTIONS.oneofs,
};

/** proto/tickraft.proto parsed with the servers' parse options (camelCase field names). */
export function parseApiProto(): protobuf.Root {
  // The parser is only in protobufjs' full build; the bundle never comes here.
  const full = createRequire(import.meta.url)('protobufjs') as typeof protobuf;
  const root = new full.Root();
  root.loadSync(API_PROTO, { keepCase: API_LOADER_OPTIONS.keepCase });
  return root;
}

/** The parsed proto as scripts/build.ts embeds it, read back. */
export function rootFromJson(json: string): protobuf.Root {
  return protobuf.Root.fromJSON(JSON.parse(json) as protobuf.INamespace);
}

function methodDefinition(
  serviceName: string,
  method: protobuf.Method,
): grpc.MethodDefinition<object, object> {
  // resolveAll() ran: both types are set.
  const request = method.resolvedRequestType!;
  const response = method.resolvedResponseType!;
  const encoder =
    (type: protobuf.Type) =>
    (value: object): Buffer =>
      Buffer.from(type.encode(type.fromObject(value)).finish());
  const decoder =
    (type: protobuf.Type) =>
    (bytes: Buffer): object =>
      type.toObject(type.decode(bytes), TO_OBJECT);
  return {
    path: `/${serviceName}/${method.name}`,
    requestStream: method.requestStream === true,
    responseStream: method.responseStream === true,
    requestSerialize: encoder(request),
    requestDeserialize: decoder(request),
    responseSerialize: encoder(response),
    responseDeserialize: decoder(response),
    originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
  };
}

export type ClientServices = Record<PublicServiceName, grpc.ServiceClientConstructor>;

/** A client constructor per public service of `root` (proto/tickraft.proto, parsed). */
export function buildClientServices(root: protobuf.Root): ClientServices {
  root.resolveAll();
  const built = {} as ClientServices;
  for (const name of PUBLIC_SERVICES) {
    const service = root.lookupService(`${PACKAGE}.${name}`);
    const definition: grpc.ServiceDefinition = Object.fromEntries(
      service.methodsArray.map((m) => [m.name, methodDefinition(`${PACKAGE}.${name}`, m)]),
    );
    built[name] = grpc.makeGenericClientConstructor(definition, name);
  }
  return built;
}

let loaded: ClientServices | undefined;

/** The public services' client constructors, built once per process. */
export function clientServices(): ClientServices {
  loaded ??= buildClientServices(
    typeof TICKRAFT_API_PROTO_JSON === 'string'
      ? rootFromJson(TICKRAFT_API_PROTO_JSON)
      : parseApiProto(),
  );
  return loaded;
}
