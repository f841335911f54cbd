/**
 * Where the chaos suite finds a Toxiproxy: the real one at TOXIPROXY_URL when that is set,
 * otherwise this project's server (main.ts) started in a process of its own, so that its delays
 * do not compete with the test driver's event loop.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { nodeCommand } from '../../test/helpers/node-child.js';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));
const READY_TIMEOUT_MS = 30_000;

export interface ToxiproxyEndpoint {
  /** Base URL without a trailing slash, e.g. http://127.0.0.1:8474. */
  readonly url: string;
  /** The spawned server's process (undefined for an external Toxiproxy). */
  readonly process: ChildProcess | undefined;
  /** Stops the spawned server (nothing for an external Toxiproxy). */
  close(): Promise<void>;
}

export function toxiproxyUrlFromEnv(): string | undefined {
  const url = process.env['TOXIPROXY_URL'];
  return url === undefined || url === '' ? undefined : url.replace(/\/+$/, '');
}

/** TOXIPROXY_URL if set, else a fresh server of ours on `host` (a free port). */
export async function openToxiproxy(host = '127.0.0.1'): Promise<ToxiproxyEndpoint> {
  const external = toxiproxyUrlFromEnv();
  if (external !== undefined) {
    return { url: external, process: undefined, close: () => Promise.resolve() };
  }
  return launchProxyServer({ listen: `${host}:0` });
}

export async function launchProxyServer(options: {
  listen: string;
  seed?: number;
}): Promise<ToxiproxyEndpoint> {
  const args = ['--import', 'tsx', MAIN, '--listen', options.listen];
  if (options.seed !== undefined) args.push('--seed', String(options.seed));
  const child = spawn(...nodeCommand(args), { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const address = await new Promise<string>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`proxy server not ready after ${READY_TIMEOUT_MS} ms: ${stderr}`));
    }, READY_TIMEOUT_MS);
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      const m = /listening on (\S+)\n/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`proxy server exited with ${code}: ${stderr}`));
    });
  });
  return {
    url: `http://${address}`,
    process: child,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    },
  };
}
