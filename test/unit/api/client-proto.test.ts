// The clients' service definitions (src/api/client-proto.ts, without proto-loader) against the
// servers' (src/api/proto.ts, proto-loader): for every method of every public service, the same
// path and streaming, the same bytes for the same message, and the same object decoded from the
// same bytes, for a message with every field set and for an empty one (proto3 `optional` absent,
// defaults filled). Both the proto parsed from source and the JSON the tickctl bundle embeds.
import t, { type Test } from 'tap';
import type * as protobuf from 'protobufjs/light.js';
import {
  buildClientServices,
  parseApiProto,
  rootFromJson,
  type ClientServices,
} from '../../../src/api/client-proto.js';
import { loadApiServices } from '../../../src/api/proto.js';
import { PUBLIC_SERVICES } from '../../../src/api/proto-options.js';

type Plain = Record<string, unknown>;

/** A value for every field of `type`: not the default, nested messages filled to `depth`. */
function filled(type: protobuf.Type, depth: number): Plain {
  const out: Plain = {};
  for (const field of type.fieldsArray) {
    const resolved = field.resolve();
    const one = (): unknown => {
      const rt = resolved.resolvedType;
      if (rt !== null && 'values' in rt) {
        const names = Object.keys(rt.values);
        return names[names.length - 1];
      }
      if (rt !== null) return depth > 0 ? filled(rt, depth - 1) : {};
      switch (field.type) {
        case 'string':
          return `${field.name}-value`;
        case 'bool':
          return true;
        case 'bytes':
          return Buffer.from([1, 2, 3]);
        case 'double':
        case 'float':
          return 2.5;
        case 'int64':
        case 'uint64':
        case 'sint64':
        case 'fixed64':
        case 'sfixed64':
          return 1_751_331_600_123; // a millisecond time: 41 bits
        default:
          return 7; // the 32-bit integers
      }
    };
    if (field.map) out[field.name] = { k1: one(), k2: one() };
    else if (field.repeated) out[field.name] = [one(), one()];
    else out[field.name] = one();
  }
  return out;
}

function compare(t: Test, ours: ClientServices): void {
  const theirs = loadApiServices();
  const proto = parseApiProto();
  let methods = 0;
  let declared = 0;
  for (const name of PUBLIC_SERVICES) {
    const a = ours[name].service;
    const b = theirs[name].service;
    t.same(Object.keys(a).sort(), Object.keys(b).sort(), `${name}: the same methods`);
    const service = proto.lookupService(`tickraft.v1.${name}`);
    declared += service.methodsArray.length;
    for (const [method, def] of Object.entries(b)) {
      const mine = a[method]!;
      t.equal(mine.path, def.path, `${name}.${method}: path`);
      t.equal(mine.requestStream, def.requestStream, `${name}.${method}: requestStream`);
      t.equal(mine.responseStream, def.responseStream, `${name}.${method}: responseStream`);
      t.equal(mine.originalName, def.originalName, `${name}.${method}: originalName`);
      const rpc = service.methods[method]!.resolve() as protobuf.Method;
      const types = [
        [
          'request',
          rpc.resolvedRequestType!,
          mine.requestSerialize,
          def.requestSerialize,
          mine.requestDeserialize,
          def.requestDeserialize,
        ],
        [
          'response',
          rpc.resolvedResponseType!,
          mine.responseSerialize,
          def.responseSerialize,
          mine.responseDeserialize,
          def.responseDeserialize,
        ],
      ] as const;
      for (const [side, type, encodeMine, encodeTheirs, decodeMine, decodeTheirs] of types) {
        for (const [label, value] of [
          ['every field set', filled(type, 3)],
          ['empty', {}],
        ] as const) {
          const bytes = encodeTheirs(value);
          t.same(encodeMine(value), bytes, `${name}.${method} ${side}, ${label}: same bytes`);
          t.same(
            decodeMine(bytes),
            decodeTheirs(bytes),
            `${name}.${method} ${side}, ${label}: same object`,
          );
        }
      }
      methods++;
    }
  }
  t.equal(methods, declared, `every declared method compared (${methods})`);
  t.ok(methods > 20, 'the services were found');
}

t.test('parsed from proto/tickraft.proto', (t) => {
  compare(t, buildClientServices(parseApiProto()));
  t.end();
});

t.test('from the JSON the tickctl bundle embeds', (t) => {
  compare(t, buildClientServices(rootFromJson(JSON.stringify(parseApiProto().toJSON()))));
  t.end();
});

t.test('a filled message decodes to what was sent (the comparison sees the fields)', (t) => {
  const ours = buildClientServices(parseApiProto());
  const def = ours.JobService.service['CreateJob']!;
  const type = parseApiProto().lookupType('tickraft.v1.CreateJobRequest');
  const value = filled(type, 3);
  const back = def.requestDeserialize(def.requestSerialize(value)) as Plain;
  t.same(back, value, 'every field survives the round trip');
  t.end();
});
