/**
 * The gRPC servers a node runs: the client API on `--listen` (api-server.ts) and, only when asked
 * for with `--debug-listen`, the test-only DebugService (src/server/debug-service.ts), each on a
 * server of its own so that the public port never serves the debug one.
 */
import * as grpc from '@grpc/grpc-js';

/** A server with the options every node server shares. */
export function createGrpcServer(extra: grpc.ServerOptions = {}): grpc.Server {
  // Channelz (grpc-js's introspection service, unused here) would track every call.
  return new grpc.Server({ 'grpc.enable_channelz': 0, ...extra });
}

/**
 * Binds `address` (host:port, port 0 for any free one); resolves with the port. `credentials`:
 * TLS (src/transport/tls.ts serverCredentials); plaintext when absent.
 */
export function bindGrpcServer(
  server: grpc.Server,
  address: string,
  credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure(),
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (err, port) => {
      if (err) reject(err);
      else resolve(port);
    });
  });
}

/**
 * Stops a server: calls in flight may finish (a worker's stream, say) for up to `forceAfterMs`,
 * then every connection is dropped. Resolves at once for a server never created.
 */
export async function shutdownGrpcServer(
  server: grpc.Server | undefined,
  forceAfterMs = 1000,
): Promise<void> {
  if (!server) return;
  await new Promise<void>((resolve) => {
    const force = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, forceAfterMs);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
}
