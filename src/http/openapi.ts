/**
 * The OpenAPI 3.1 document of the HTTP/JSON API, made from the route table (routes.ts) and
 * proto/tickraft.proto (its comments become the descriptions). `npm run openapi`
 * (scripts/openapi.ts) writes it to src/http/openapi.json, which the nodes serve at
 * `GET /v1/openapi.json`; test/unit/http/openapi.test.ts fails when the file is not what this
 * makes, so the document cannot drift from the routes or the proto.
 *
 * Schemas are the messages in their JSON form: properties by JSON name, enums as their names,
 * 64-bit integers as integers. A message-typed field may be null in a reply (a message the reply
 * does not carry: `usage` outside GetTenant), and every error status refers to one Error schema.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type protobuf from 'protobufjs';
import { API_LOADER_OPTIONS } from '../api/proto-options.js';
import { ERROR_STATUSES } from './http-errors.js';
import { snakeCase } from './json-request.js';
import { compileTemplate } from './path-template.js';
import { OPENAPI_PATH, ROUTES, UNROUTED_RPCS, type HttpRoute } from './routes.js';

const API_PROTO = fileURLToPath(new URL('../../proto/tickraft.proto', import.meta.url));
const PACKAGE = 'tickraft.v1';

type Json = Record<string, unknown>;

/** proto/tickraft.proto parsed as the servers parse it, with its `//` comments kept. */
export function parseApiProtoWithComments(): protobuf.Root {
  // The parser is only in protobufjs' full build (and this runs only in scripts and tests).
  const full = createRequire(import.meta.url)('protobufjs') as typeof protobuf;
  const root = new full.Root();
  root.loadSync(API_PROTO, { keepCase: API_LOADER_OPTIONS.keepCase, alternateCommentMode: true });
  root.resolveAll();
  return root;
}

const SERVICE_DESCRIPTIONS: Readonly<Record<string, string>> = {
  JobService:
    'Jobs: create (one or many), read, update, delete, list, pause, resume, trigger, backfill, and the preview of a schedule.',
  RunService:
    "Runs of a job, one run with its attempts, the tenant's DLQ (dead runs), replay, asynchronous completion and watching a job's runs.",
  TenantService: 'Tenants, their signing secrets, delivery caps, retention and limits.',
  TokenService: 'API tokens: create, list, revoke (admin only).',
  AdminService:
    "The cluster: status, leadership, membership, replica moves, splits, bulk changes of a tenant's jobs (admin only, but ClusterStatus).",
};

const DESCRIPTION = [
  "The HTTP/JSON form of tickraft's public gRPC API (proto/tickraft.proto, docs/API.md), served by every node started with `--http-listen` (docs/HTTP.md). Each request is a call of the node's own gRPC API: the same authentication, validation, tenant scoping and routing to group leaders.",
  '',
  '- Every path but this document needs `Authorization: Bearer <token>`: the admin token, or a tenant token whose role covers the call (docs/SECURITY.md).',
  '- Bodies and replies are the proto messages in their JSON form: fields by their JSON name (`jobId`; the proto name `job_id` is accepted in requests too), enums by name, 64-bit integers as numbers. An unknown field or enum name is refused (400). Replies carry every field, but unset `optional` ones.',
  '- Path variables are one path segment each, percent-encoded: a fire id `acme/nightly:1751333400000` is `acme%2Fnightly%3A1751333400000`.',
  '- Errors: the HTTP status of the gRPC code (as grpc-gateway maps them; FAILED_PRECONDITION is 400) and an `Error` body.',
  `- Not served: ${Object.entries(UNROUTED_RPCS)
    .map(([rpc, why]) => `\`${rpc}\`, ${why}`)
    .join('; ')}.`,
].join('\n');

const ERROR_DESCRIPTIONS: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT (with field violations), FAILED_PRECONDITION or OUT_OF_RANGE; or a body, path or query the HTTP layer cannot read (HTTP_…)',
  401: 'UNAUTHENTICATED: no token, a malformed one, or one no node issued or that was revoked',
  403: "PERMISSION_DENIED: the token's role does not cover the call, or it is another tenant's",
  404: "NOT_FOUND: the job, run, tenant, token, node or group does not exist (or is another tenant's)",
  409: 'ALREADY_EXISTS, or ABORTED (a version conflict: read again and retry)',
  413: 'the request body is larger than this path takes',
  429: "RESOURCE_EXHAUSTED: over a tenant's limit (Retry-After for the write rate)",
  500: "INTERNAL (with a correlation id, also in the node's log), UNKNOWN or DATA_LOSS",
  503: 'UNAVAILABLE: no leader, a node unreachable, a bulk call not committed everywhere (Retry-After)',
  504: 'DEADLINE_EXCEEDED: a write may still commit; retry with the same request id',
};

/** Summaries where the RPC's comment has none to give (missing, or it starts elsewhere). */
const SUMMARIES: Readonly<Record<string, string>> = {
  'JobService.GetJob': 'Reads a job',
  'TenantService.CreateTenant': 'Creates a tenant',
  'TenantService.GetTenant': 'Reads a tenant, with its usage against its limits',
  'TenantService.ListTenants': 'Lists the tenants',
  'AdminService.ClusterStatus': "Every node's view of its replicas, the groups and their leaders",
};

/** The first sentence of a comment, for an operation's summary. */
function firstSentence(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  const m = /^(.+?[.:])(\s|$)/.exec(flat);
  return (m ? m[1]! : flat).replace(/[.:]$/, '');
}

function commentOf(x: { comment: string | null }): string | undefined {
  const c = x.comment?.trim();
  return c === undefined || c === '' ? undefined : c.replace(/\n/g, ' ');
}

function scalarSchema(type: string): Json {
  switch (type) {
    case 'string':
      return { type: 'string' };
    case 'bool':
      return { type: 'boolean' };
    case 'double':
      return { type: 'number', format: 'double' };
    case 'float':
      return { type: 'number', format: 'float' };
    case 'bytes':
      return { type: 'string', contentEncoding: 'base64' };
    case 'int32':
    case 'sint32':
    case 'sfixed32':
      return { type: 'integer', format: 'int32' };
    case 'uint32':
    case 'fixed32':
      return { type: 'integer', minimum: 0, maximum: 4294967295 };
    case 'int64':
    case 'sint64':
    case 'sfixed64':
      return { type: 'integer', format: 'int64' };
    case 'uint64':
    case 'fixed64':
      return { type: 'integer', format: 'int64', minimum: 0 };
    default:
      throw new Error(`no JSON schema for the proto type ${type}`);
  }
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });

class SchemaSet {
  readonly schemas = new Map<string, Json>();

  /** The schema of one value of `f` (an element, for a repeated or map field). */
  private element(f: protobuf.Field): Json {
    const t = f.resolvedType;
    if (t === null) return scalarSchema(f.type);
    if ('fieldsArray' in t) this.message(t);
    else this.enumeration(t);
    return ref(t.name);
  }

  field(f: protobuf.Field): Json {
    const one = this.element(f);
    const description = commentOf(f);
    let schema: Json;
    if (f.map) schema = { type: 'object', additionalProperties: one };
    else if (f.repeated) schema = { type: 'array', items: one };
    else if (f.resolvedType !== null && 'fieldsArray' in f.resolvedType)
      // Replies carry an unset message field as null.
      schema = { anyOf: [one, { type: 'null' }] };
    else schema = one;
    return description === undefined ? schema : { ...schema, description };
  }

  message(t: protobuf.Type): void {
    if (this.schemas.has(t.name)) return;
    const schema: Json = { type: 'object' };
    this.schemas.set(t.name, schema);
    const description = commentOf(t);
    if (description !== undefined) schema['description'] = description;
    const properties: Json = {};
    for (const f of t.fieldsArray) properties[f.name] = this.field(f);
    schema['properties'] = properties;
    // Requests with a field the message lacks are refused: the document says so.
    schema['additionalProperties'] = false;
  }

  private enumeration(e: protobuf.Enum): void {
    if (this.schemas.has(e.name)) return;
    const names = Object.keys(e.values);
    const notes = names
      .filter((n) => e.comments[n])
      .map((n) => `\`${n}\`: ${e.comments[n]!.replace(/\n/g, ' ')}`);
    const description = [commentOf(e), ...notes].filter((x) => x !== undefined).join('; ');
    this.schemas.set(e.name, {
      type: 'string',
      enum: names,
      ...(description === '' ? {} : { description }),
    });
  }
}

function fieldAt(type: protobuf.Type, path: string): protobuf.Field {
  let t = type;
  const parts = path.split('.').map((p) => p.replace(/\[\]$/, ''));
  for (const [i, p] of parts.entries()) {
    const f = t.fields[p];
    if (f === undefined) throw new Error(`${type.name} has no field ${path}`);
    if (i === parts.length - 1) return f;
    const sub = f.resolvedType;
    if (sub === null || !('fieldsArray' in sub)) throw new Error(`${path}: ${p} is no message`);
    t = sub;
  }
  throw new Error(`empty field path on ${type.name}`);
}

/** A field's schema for a parameter, whose own description says what the field's would. */
function withoutDescription(schema: Json): Json {
  return Object.fromEntries(Object.entries(schema).filter(([k]) => k !== 'description'));
}

const PARAMETER_NOTES: Readonly<Record<string, string>> = {
  fire_id:
    'The fire id `<tenant>/<job id>:<slot ms>`, percent-encoded as one path segment: `acme%2Fnightly%3A1751333400000` (encodeURIComponent).',
};

function pathParameters(route: HttpRoute, request: protobuf.Type, set: SchemaSet): Json[] {
  return compileTemplate(route.path).variables.map((name) => {
    const fields = route.bind[name] ?? [];
    const first = fields[0];
    if (first === undefined) throw new Error(`${route.path}: {${name}} binds no field`);
    const f = fieldAt(request, first);
    const schema = withoutDescription(set.field(f));
    const sets = fields.map((p) => `\`${p.split('.').map(snakeCase).join('.')}\``).join(', ');
    return {
      name,
      in: 'path',
      required: true,
      description: `${PARAMETER_NOTES[name] ?? ''}${PARAMETER_NOTES[name] ? ' ' : ''}Sets ${sets} of the request; a body or query giving it too must give the same value.`,
      schema,
    };
  });
}

/** The query parameters of a GET or DELETE: the request's fields not in the path. */
function queryParameters(route: HttpRoute, request: protobuf.Type, set: SchemaSet): Json[] {
  const bound = new Set(Object.values(route.bind).flat());
  const out: Json[] = [];
  const visit = (t: protobuf.Type, prefix: string, jsonPrefix: string): void => {
    for (const f of t.fieldsArray) {
      const json = `${jsonPrefix}${f.name}`;
      if (bound.has(json) || f.map) continue;
      const name = `${prefix}${snakeCase(f.name)}`;
      const sub = f.resolvedType;
      if (sub !== null && 'fieldsArray' in sub) {
        if (!f.repeated) visit(sub, `${name}.`, `${json}.`);
        continue;
      }
      const description = commentOf(f);
      const schema = withoutDescription(set.field(f));
      out.push({
        name,
        in: 'query',
        required: false,
        ...(description === undefined ? {} : { description }),
        schema,
        ...(f.repeated ? { explode: true } : {}),
      });
    }
  };
  visit(request, '', '');
  return out;
}

function operation(route: HttpRoute, root: protobuf.Root, set: SchemaSet): Json {
  const service = root.lookupService(`${PACKAGE}.${route.service}`);
  const method = service.methods[route.rpc];
  if (!method?.resolvedRequestType || !method.resolvedResponseType)
    throw new Error(`no RPC ${route.service}.${route.rpc}`);
  const request = method.resolvedRequestType;
  const response = method.resolvedResponseType;
  set.message(request);
  set.message(response);
  const grpcName = `${PACKAGE}.${route.service}/${route.rpc}`;
  const comment = commentOf(method);
  const parameters = [
    ...pathParameters(route, request, set),
    ...(route.rest === 'query' ? queryParameters(route, request, set) : []),
  ];
  const ok: Json = method.responseStream
    ? {
        description: `A stream of newline-delimited JSON (one line per message, \`{"result": ${response.name}}\`); a failure after the stream began is its last line, \`{"error": Error}\`.`,
        content: { 'application/x-ndjson': { schema: ref(`${response.name}StreamLine`) } },
      }
    : {
        description: `The ${response.name}.`,
        content: { 'application/json': { schema: ref(response.name) } },
      };
  if (method.responseStream) {
    set.schemas.set(`${response.name}StreamLine`, {
      description: `One line of the ${route.rpc} stream.`,
      oneOf: [
        {
          type: 'object',
          properties: { result: ref(response.name) },
          required: ['result'],
          additionalProperties: false,
        },
        {
          type: 'object',
          properties: { error: ref('Error') },
          required: ['error'],
          additionalProperties: false,
        },
      ],
    });
  }
  const errors = [...ERROR_STATUSES, ...(route.rest === 'body' ? [413] : [])].sort((a, b) => a - b);
  return {
    tags: [route.service],
    operationId: `${route.service}_${route.rpc}`,
    summary:
      SUMMARIES[`${route.service}.${route.rpc}`] ??
      (comment === undefined ? route.rpc : firstSentence(comment)),
    description: `${comment === undefined ? '' : `${comment}\n\n`}gRPC: \`${grpcName}\`.`,
    'x-grpc-method': grpcName,
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.rest === 'body'
      ? {
          requestBody: {
            description: `The ${request.name} as JSON; fields set by the path may be left out. An empty body is \`{}\`.`,
            required: false,
            content: { 'application/json': { schema: ref(request.name) } },
          },
        }
      : {}),
    responses: {
      '200': ok,
      ...Object.fromEntries(
        errors.map((s) => [String(s), { $ref: `#/components/responses/Error${s}` }]),
      ),
    },
  };
}

const ERROR_SCHEMAS: Readonly<Record<string, Json>> = {
  Error: {
    type: 'object',
    description: 'Every error: the gRPC status (number and name), its message, and details.',
    properties: {
      code: { type: 'integer', description: 'The gRPC status code (3 is INVALID_ARGUMENT).' },
      status: { type: 'string', description: 'The gRPC status name, e.g. `NOT_FOUND`.' },
      message: { type: 'string' },
      details: ref('ErrorDetails'),
    },
    required: ['code', 'status', 'message', 'details'],
    additionalProperties: false,
  },
  ErrorDetails: {
    type: 'object',
    properties: {
      error_code: {
        type: 'string',
        description:
          "The stable tickraft error code (`JOB_NOT_FOUND`, `AUTH_MISSING`, …; the HTTP layer's own: `HTTP_NOT_FOUND`, `HTTP_METHOD_NOT_ALLOWED`, `HTTP_BODY_INVALID`, `HTTP_BODY_TOO_LARGE`, `HTTP_PATH_INVALID`, `REQUEST_INVALID`).",
      },
      field_violations: {
        type: 'array',
        description:
          'One per bad field, named by its proto path in snake_case (`spec.retry.max_attempts`).',
        items: ref('FieldViolation'),
      },
      retry_delay_ms: { type: 'integer', description: 'When to retry (google.rpc.RetryInfo).' },
      leader: { type: 'string', description: "The group leader's node id, when known." },
      correlation_id: { type: 'string', description: "INTERNAL: the id in the node's log." },
    },
    required: ['error_code', 'field_violations'],
    additionalProperties: false,
  },
  FieldViolation: {
    type: 'object',
    properties: { field: { type: 'string' }, description: { type: 'string' } },
    required: ['field', 'description'],
    additionalProperties: false,
  },
};

/** Sorts an object's keys, so that the document's text depends on nothing but its content. */
function sorted(schemas: Map<string, Json>): Json {
  return Object.fromEntries(
    [...schemas.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}

/** The document, from the route table and `root` (parseApiProtoWithComments()). */
export function buildOpenApi(root: protobuf.Root): Json {
  const set = new SchemaSet();
  const paths: Record<string, Record<string, Json>> = {};
  for (const route of ROUTES) {
    const item = (paths[route.path] ??= {});
    item[route.method.toLowerCase()] = operation(route, root, set);
  }
  paths[OPENAPI_PATH] = {
    get: {
      tags: ['Document'],
      operationId: 'OpenApiDocument',
      summary: 'This document',
      description:
        'The OpenAPI document of this API. Served without a token: it describes the API and holds nothing of the cluster.',
      security: [],
      responses: {
        '200': {
          description: 'The OpenAPI 3.1 document.',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    },
  };
  for (const [name, schema] of Object.entries(ERROR_SCHEMAS)) set.schemas.set(name, schema);
  const responses = Object.fromEntries(
    [...ERROR_STATUSES, 413]
      .sort((a, b) => a - b)
      .map((s) => [
        `Error${s}`,
        {
          description: ERROR_DESCRIPTIONS[s] ?? 'An error.',
          content: { 'application/json': { schema: ref('Error') } },
        },
      ]),
  );
  return {
    openapi: '3.1.0',
    info: {
      title: 'tickraft HTTP/JSON API',
      version: 'v1',
      description: DESCRIPTION,
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    tags: [
      ...Object.entries(SERVICE_DESCRIPTIONS).map(([name, description]) => ({ name, description })),
      { name: 'Document', description: 'This document.' },
    ],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The admin token, or a tenant token (reader, writer, worker): docs/SECURITY.md.',
        },
      },
      responses,
      schemas: sorted(set.schemas),
    },
  };
}
