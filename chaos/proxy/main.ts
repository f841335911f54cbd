/**
 * A Toxiproxy-compatible server for the chaos suite (docs/chaos.md):
 *
 *   tsx chaos/proxy/main.ts --listen 127.0.0.1:8474 [--seed N]
 *
 * Prints one line `listening on HOST:PORT` once the API is up (port 0 picks a free port), and
 * stops on SIGTERM or SIGINT, closing every proxy. Exit codes: 0 clean stop, 2 bad flags, 1
 * anything else (e.g. the API address is taken).
 */
import { Command, CommanderError } from 'commander';
import type { AddressInfo } from 'node:net';
import { SeededRand } from '../../src/base/rand.js';
import { formatAddress, isLoopbackHost, parseAddress } from './address.js';
import { createApiServer } from './http-api.js';
import { ProxyRegistry } from './registry.js';

interface Flags {
  listen: string;
  seed?: string;
}

function fail(message: string, code: number): never {
  process.stderr.write(`toxiproxy: ${message}\n`);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  const program = new Command('chaos/proxy/main.ts')
    .description('a Toxiproxy-compatible HTTP API and TCP proxy for loopback test clusters')
    .option('--listen <host:port>', 'API address (loopback only)', '127.0.0.1:8474')
    .option('--seed <n>', 'seed of the toxicity and jitter draws (default: from the clock)')
    .exitOverride();
  try {
    program.parse(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
    throw err;
  }
  const flags = program.opts<Flags>();
  const listen = parseAddress(flags.listen);
  if (typeof listen === 'string') fail(`--listen: ${listen}`, 2);
  if (!isLoopbackHost(listen.host)) fail('--listen: must be a loopback address', 2);
  const seed = flags.seed === undefined ? Date.now() : Number(flags.seed);
  if (!Number.isSafeInteger(seed)) fail(`--seed: must be an integer, got ${flags.seed}`, 2);
  const rand = new SeededRand(seed);
  const registry = new ProxyRegistry(() => rand.float());
  const server = createApiServer(registry);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: listen.host, port: listen.port }, resolve);
  }).catch((err: unknown) => fail(`cannot listen on ${flags.listen}: ${String(err)}`, 1));
  const bound = server.address() as AddressInfo;
  process.stdout.write(`listening on ${formatAddress(bound.address, bound.port)}\n`);
  const stop = (): void => {
    server.close();
    server.closeAllConnections();
    registry.closeAll().then(
      () => process.exit(0),
      (err: unknown) => fail(`error while stopping: ${String(err)}`, 1),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

await main(process.argv.slice(2));
