/**
 * An OpenTelemetry collector's OTLP/HTTP receiver on loopback, for the tracing tests: it keeps
 * every span it is sent (JSON) and answers 200. Closed with the test.
 */
import type { Test } from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

type Obj = Record<string, unknown>;

export async function otlpCollector(t: Test): Promise<{ url: string; spans: Obj[] }> {
  const spans: Obj[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      const doc = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: Obj[] }[] }[] };
      for (const rs of doc.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans };
}
