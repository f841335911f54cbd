/**
 * A webhook sink in a child process of its own, for the benchmarks: the sink's CPU then does
 * not count against the sender's, as on a real network. `source` is CommonJS run with `node -e`;
 * it must listen on 127.0.0.1 port 0 and print the port on stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export async function startSinkProcess(
  source: string,
): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn(process.execPath, ['-e', source], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', (code) => reject(new Error(`sink exited with ${code}`)));
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

/**
 * `count` processes each running `source` (CommonJS, `node -e`) with `argv`, stdin piped, and
 * what each wrote on stdout so far (`outputs[i]`, appended as it arrives): the bare senders.
 */
export function spawnScriptProcesses(
  source: string,
  argv: readonly string[],
  count: number,
): { children: ChildProcess[]; outputs: string[] } {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['-e', source, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const outputs = children.map(() => '');
  children.forEach((c, i) => c.stdout?.on('data', (d: Buffer) => (outputs[i] += d.toString())));
  return { children, outputs };
}

/**
 * CommonJS source of `requestOf(jobId, at)`, for the bare senders' scripts: the request a node
 * sends for job `jobId` of tenant acme at slot `at` (ms), with tickraft's headers, user-agent
 * and body fields, so that a bare sender does the same work per request as a node's send.
 */
export const BARE_REQUEST_SOURCE = `
function requestOf(jobId, at) {
  const slot = new Date(at).toISOString();
  const id = 'acme/' + jobId + ':' + at;
  return { method: 'POST', path: '/hook', headers: {
    'user-agent': 'tickraft-webhook/1', 'content-type': 'application/json',
    'idempotency-key': id, 'tickraft-fencing-token': '33554432',
    'tickraft-scheduled-for': slot, 'tickraft-attempt': '1', 'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at / 1000)),
    'webhook-signature': 'v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' },
    body: JSON.stringify({ jobId, tenant: 'acme', fireId: id, slot, slotMs: at, attempt: 1,
      fencingToken: 33554432, payload: null }) };
}
`;
