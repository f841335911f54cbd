// The checked-in OpenAPI document (src/http/openapi.json, what nodes serve) is exactly what
// `npm run openapi` makes from the route table and the proto, so it cannot drift from either;
// and it has an operation for every route, each naming its RPC.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { buildOpenApi, parseApiProtoWithComments } from '../../../src/http/openapi.js';
import { OPENAPI_PATH, ROUTES } from '../../../src/http/routes.js';
import { OPENAPI_JSON, openApiText } from '../../../scripts/openapi.js';

type Doc = { paths: Record<string, Record<string, Record<string, unknown>>> };

t.test('the checked-in document is what npm run openapi writes', async (t) => {
  const file = readFileSync(OPENAPI_JSON, 'utf8');
  t.same(
    JSON.parse(file),
    buildOpenApi(parseApiProtoWithComments()),
    'same content (if not: npm run openapi, and commit src/http/openapi.json)',
  );
  t.equal(file, await openApiText(), 'same text, as prettier formats it');
});

t.test('one operation per route, naming its RPC; the document itself is public', (t) => {
  const doc = JSON.parse(readFileSync(OPENAPI_JSON, 'utf8')) as Doc;
  const ops = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]) => ({ path, method: method.toUpperCase(), op })),
  );
  t.equal(ops.length, ROUTES.length + 1, 'the routes and the document');
  for (const r of ROUTES) {
    const op = doc.paths[r.path]?.[r.method.toLowerCase()];
    t.equal(op?.['x-grpc-method'], `tickraft.v1.${r.service}/${r.rpc}`, `${r.method} ${r.path}`);
    t.ok(
      (op?.['responses'] as Record<string, unknown>)['401'],
      'documents the refusal of no token',
    );
    t.notOk('security' in (op ?? {}), 'needs the bearer token (the document-wide security)');
  }
  t.same(doc.paths[OPENAPI_PATH]?.['get']?.['security'], [], 'the document needs no token');
  t.end();
});
