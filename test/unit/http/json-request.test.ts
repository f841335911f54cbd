// Requests are read strictly: field names (JSON or proto), types, enums by name, int64 as
// numbers or strings, path variables against the body, query parameters; every mistake is a
// violation named as the gRPC API names it.
import t from 'tap';
import type protobuf from 'protobufjs/light.js';
import { parseApiProto } from '../../../src/api/client-proto.js';
import { ValidationError } from '../../../src/base/errors.js';
import { buildRequest, type Msg } from '../../../src/http/json-request.js';
import { ROUTES, type HttpRoute } from '../../../src/http/routes.js';

const root = parseApiProto();
root.resolveAll();

function route(rpc: string): { route: HttpRoute; type: protobuf.Type } {
  const r = ROUTES.find((x) => x.rpc === rpc)!;
  const type = root.lookupService(`tickraft.v1.${r.service}`).methods[rpc]!.resolvedRequestType!;
  return { route: r, type };
}

function build(rpc: string, params: Record<string, string>, body?: unknown, query = ''): Msg {
  const { route: r, type } = route(rpc);
  return buildRequest(r, type, {
    params: new Map(Object.entries(params)),
    query: new URLSearchParams(query),
    body,
  });
}

function violations(fn: () => unknown): { field: string; reason: string }[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return [...err.violations];
    throw err;
  }
  throw new Error('no violation');
}

t.test('a create: the path sets spec.tenant; JSON and proto names; int64 as text', (t) => {
  const req = build(
    'CreateJob',
    { tenant: 'acme' },
    {
      job_id: 'j1',
      requestId: 'r1',
      spec: {
        schedule: 'every 1h',
        start_at_ms: '1751333400000',
        endAtMs: 1751333500000,
        delivery: 'DELIVERY_SEMANTICS_AT_MOST_ONCE',
        target: { url: 'https://x.example/hook', headers: { 'X-Key': 'v' } },
        retry: { multiplier: 1.5, maxAttempts: 3 },
        timezone: null,
      },
    },
  );
  t.same(req, {
    jobId: 'j1',
    requestId: 'r1',
    spec: {
      tenant: 'acme',
      schedule: 'every 1h',
      startAtMs: 1751333400000,
      endAtMs: 1751333500000,
      delivery: 'DELIVERY_SEMANTICS_AT_MOST_ONCE',
      target: { url: 'https://x.example/hook', headers: { 'X-Key': 'v' } },
      retry: { multiplier: 1.5, maxAttempts: 3 },
    },
  });
  t.same(
    build('CreateJob', { tenant: 'acme' }, { spec: { tenant: 'acme' } }),
    {
      spec: { tenant: 'acme' },
    },
    'the same tenant in the body is fine',
  );
  t.end();
});

t.test('mistakes are named, all at once', (t) => {
  const v = violations(() =>
    build(
      'CreateJob',
      { tenant: 'acme' },
      {
        jobId: 7,
        bogus: true,
        spec: {
          tenant: 'other',
          delivery: 'AT_MOST_ONCE',
          priority: 2 ** 40,
          anchorMs: 2 ** 60,
          retry: { multiplier: 'fast' },
          target: { headers: { a: 1 } },
          constructor: 1,
        },
        job_id: 'again',
      },
    ),
  );
  t.same(
    v.map((x) => x.field).sort(),
    [
      'bogus',
      'job_id',
      'job_id',
      'spec.anchor_ms',
      'spec.constructor',
      'spec.delivery',
      'spec.priority',
      'spec.retry.multiplier',
      'spec.target.headers.a',
      'spec.tenant',
    ].sort(),
  );
  t.match(
    v.find((x) => x.field === 'spec.delivery')?.reason,
    /must be one of DELIVERY_SEMANTICS_UNSPECIFIED, .*got "AT_MOST_ONCE"/,
  );
  t.match(v.find((x) => x.field === 'spec.tenant')?.reason, /path's \{tenant\} is "acme"/);
  t.same(
    violations(() => build('CreateJob', { tenant: 'a' }, [1])),
    [{ field: '(body)', reason: 'must be a JSON object (a CreateJobRequest), got an array' }],
  );
  t.end();
});

t.test('CreateJobs: the path tenant goes into every job', (t) => {
  const req = build(
    'CreateJobs',
    { tenant: 'acme' },
    {
      jobs: [{ jobId: 'a', spec: {} }, { jobId: 'b' }],
    },
  );
  t.same(req, {
    jobs: [
      { jobId: 'a', spec: { tenant: 'acme' } },
      { jobId: 'b', spec: { tenant: 'acme' } },
    ],
  });
  t.same(
    violations(() =>
      build(
        'CreateJobs',
        { tenant: 'acme' },
        { jobs: [{ jobId: 'a' }, { spec: { tenant: 'b' } }] },
      ),
    ).map((x) => x.field),
    ['jobs[1].spec.tenant'],
  );
  t.end();
});

t.test('query parameters', (t) => {
  t.same(
    build(
      'ListRuns',
      { tenant: 'acme', job: 'j1' },
      undefined,
      'status=RUN_STATUS_DEAD&page_size=5&pageToken=abc',
    ),
    { tenant: 'acme', jobId: 'j1', status: 'RUN_STATUS_DEAD', pageSize: 5, pageToken: 'abc' },
  );
  t.same(build('ListRuns', { tenant: 'acme', job: 'j1' }, undefined, 'status=4').status, 4);
  t.same(
    violations(() =>
      build(
        'ListRuns',
        { tenant: 'acme', job: 'j1' },
        undefined,
        'status=DEAD&page_size=-1&x=1&tenant=b&page_token=a&page_token=b',
      ),
    ).map((x) => x.field),
    ['status', 'page_size', 'x', 'page_token', 'tenant'],
  );
  t.same(
    violations(() => build('PauseJob', { tenant: 'acme', job: 'j1' }, {}, 'tenant=acme')),
    [
      {
        field: 'tenant',
        reason: 'query parameters are not read on this path: send the field in the JSON body',
      },
    ],
  );
  t.same(build('SplitGroup', { group_id: '3' }, undefined), { groupId: 3 });
  t.same(
    violations(() => build('SplitGroup', { group_id: 'three' }, undefined)).map((x) => x.field),
    ['group_id'],
  );
  t.same(build('RemoveNode', { node_id: 'n3' }, { force: true }), { nodeId: 'n3', force: true });
  t.same(
    violations(() => build('RemoveNode', { node_id: 'n3' }, { force: 'yes' })).map((x) => x.field),
    ['force'],
  );
  t.end();
});
