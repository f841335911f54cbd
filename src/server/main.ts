/**
 * `tickraft serve`: parse flags (or a JSON config file), start the node, and handle signals.
 * SIGTERM and SIGINT hand leaderships over, flush and exit 0 within --shutdown-timeout-ms;
 * SIGKILL needs no handling because every acknowledged write is already on disk.
 * Exit codes: 0 clean stop, 2 bad flags or config, 1 anything else.
 */
import { NO_TRACING, startTracing } from '../observe/tracing.js';
import { Command, CommanderError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { ValidationError } from '../base/errors.js';
import { packageVersion } from '../config/version.js';
import {
  compileNodeOptions,
  formatHostPort,
  OPTION_FLAGS,
  type CompiledNodeConfig,
  type NodeOptions,
} from '../config/node-config.js';
import { ApiServer } from '../api/api-server.js';
import { readAdminTokenFile } from '../auth/admin-token-file.js';
import { Authenticator } from '../auth/authenticator.js';
import { hashToken } from '../auth/token-secret.js';
import { SystemClock } from '../base/clock.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import {
  loadNodeTls,
  plaintextListeners,
  reloadNodeTls,
  type NodeTls,
} from '../config/tls-files.js';
import { serverCredentials } from '../transport/tls.js';
import { HttpApiServer } from '../http/http-api-server.js';
import { loopbackAddress } from '../http/grpc-loopback.js';
import { DebugServer } from './debug-service.js';
import { TickraftNode, type NodeLogger } from './node.js';

const EXIT_USAGE = 2;

function int(value: string): number {
  return /^-?\d+$/.test(value) ? Number(value) : Number.NaN;
}

/** A plain decimal number (no exponent, no hex); anything else is NaN, which validation names. */
function decimal(value: string): number {
  return /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN;
}

function buildProgram(run: (opts: NodeOptions) => Promise<number>): Command {
  const program = new Command('tickraft')
    .description('tickraft: a Raft-replicated job scheduler cluster')
    .exitOverride()
    .version(packageVersion(), '--version', 'print the version of tickraft and exit')
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  const serve = program
    .command('serve')
    .description(
      'run a tickraft node (creates a cluster with --initial-cluster, or restarts on --data-dir)',
    )
    .option('--config <file>', 'JSON file with the options below (camelCase keys); flags win')
    .option('--id <id>', 'this node id, e.g. n1 (required)')
    .option('--data-dir <dir>', "directory for this node's LevelDB (required)")
    .option(
      '--listen <host:port>',
      'client API address; other nodes forward calls to it (default 127.0.0.1:7001)',
    )
    .option(
      '--advertise-address <host:port>',
      'client API address clients are told to dial (ClusterStatus, workers) when it is not --listen, e.g. a published port (default: --listen)',
    )
    .option('--peer-listen <host:port>', 'peer transport address (default 127.0.0.1:7101)')
    .option('--initial-cluster <list>', 'id=host:port,… peer addresses of the initial nodes')
    .option(
      '--join <host:port>',
      'client API address of a running member: an empty node joins that cluster',
    )
    .addOption(
      new Option('--groups <n>', 'data groups of a new cluster (default 16)').argParser(int),
    )
    .addOption(
      new Option('--tick-ms <ms>', 'milliseconds per Raft tick (default 50)').argParser(int),
    )
    .addOption(
      new Option('--election-ticks <n>', 'election timeout in ticks (default 10)').argParser(int),
    )
    .addOption(
      new Option('--heartbeat-ticks <n>', 'heartbeat interval in ticks (default 2)').argParser(int),
    )
    .addOption(
      new Option(
        '--snapshot-entries <n>',
        'applied entries between snapshots (default 10000)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--snapshot-bytes <n>',
        'applied entry bytes between snapshots (default 67108864)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--log-tail-bytes <n>',
        'log entry bytes each group keeps in memory; older ones are read from disk (default 1048576)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--quiesce-ticks <n>',
        'idle ticks before a data group quiesces; 0 never (default 20)',
      ).argParser(int),
    )
    .addOption(
      new Option('--shutdown-timeout-ms <ms>', 'bound on a graceful stop (default 5000)').argParser(
        int,
      ),
    )
    .addOption(
      new Option(
        '--look-ahead-ms <ms>',
        'propose fire intents this long before their slot (default 3000)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--misfire-threshold-ms <ms>',
        "a slot later than this goes through the job's misfire policy (default 5000)",
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--result-hold-ms <ms>',
        'hold attempt results back at most this long while deliveries wait, to log them after the sends; 0 never (default 2000)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--split-jobs <n>',
        'split a data group in two once it holds more jobs than this; 0 never (default 1000000)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--split-fire-rate <fires/s>',
        'split a data group in two once its leader fires more than this per second, averaged ' +
          'over the last minute; 0 never (default 0)',
      ).argParser(decimal),
    )
    .addOption(
      new Option(
        '--webhook-connections <n>',
        'connections to one webhook origin (default 64)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--origin-inflight <n>',
        'deliveries in flight to one origin (default: --webhook-connections)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--tenant-inflight <n>',
        'deliveries of one tenant in flight on this node (default 4096)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--delivery-queue <n>',
        'deliveries waiting on this node before back-pressure (default 200000)',
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--run-output-max-bytes <n>',
        "bytes of each attempt's output (webhook response body, worker stdout/stderr, CompleteRun output) kept in this node's memory beside the log for `tickctl runs logs`; lost if the node restarts (the attempt record keeps a short excerpt); 0 keeps none (default 65536)",
      ).argParser(int),
    )
    .addOption(
      new Option(
        '--run-output-store-bytes <n>',
        'bytes of run output this node keeps in all; the attempts written to longest ago are evicted first (default 67108864)',
      ).argParser(int),
    )
    .option(
      '--admin-token-file <file>',
      'file holding the cluster admin token (at least 32 characters, e.g. `openssl rand -hex 32`); every node of a cluster gets the same file (required unless --insecure-no-auth)',
    )
    .option(
      '--insecure-no-auth',
      'serve every call without authentication: anyone who reaches the port is the admin (loopback development only)',
    )
    .option(
      '--metrics-listen <host:port>',
      'HTTP address for /metrics, /healthz and /readyz, HTTPS with --tls-cert (default: not served)',
    )
    .addOption(
      new Option(
        '--metrics-tenants <n>',
        'tenants named in the per-tenant metrics: the n most active on this node, the rest under ' +
          'tenant="other"; 0 puts every tenant under other (default 20, at most 1000)',
      ).argParser(int),
    )
    .option(
      '--allow-target <cidr>',
      'let webhooks reach this range although it is loopback, private, link-local, … ' +
        '(repeatable, or a comma list; e.g. 127.0.0.0/8 for a local sink; default: none)',
      (value: string, previous: string | undefined) =>
        previous === undefined ? value : `${previous},${value}`,
    )
    .option(
      '--http-listen <host:port>',
      'serve the HTTP/JSON API (docs/HTTP.md) on this address: every request is a call of the client API on --listen, with the same token; HTTPS with --tls-cert (default: not served)',
    )
    .option(
      '--otlp-endpoint <url>',
      'send OpenTelemetry spans (API calls, delivery attempts) over OTLP/HTTP to this collector, e.g. http://127.0.0.1:4318; webhooks then carry a traceparent header (default: no tracing)',
    )
    .option(
      '--debug-listen <host:port>',
      'serve the test-only DebugService (unauthenticated: key-value store, scheduler internals) ' +
        'on this address, for tests and benchmarks (default: not served)',
    )
    .option(
      '--peer-route <id=host:port>',
      'dial peer id at host:port instead of its advertised peer address (repeatable, or a comma list; e.g. through a proxy)',
      (value: string, previous: string | undefined) =>
        previous === undefined ? value : `${previous},${value}`,
    );
  addTlsOptions(serve).action(async (flags: Record<string, unknown>) => {
    process.exitCode = await run(mergeConfig(flags));
  });
  return program;
}

/** The TLS flags of `serve` (docs/OPERATIONS.md, TLS). */
function addTlsOptions(cmd: Command): Command {
  return cmd
    .option(
      '--tls-cert <file>',
      'PEM certificate (chain) of the client API: serve it (and --metrics-listen) with TLS; other nodes are then dialled with TLS too when forwarding or joining. Needs --tls-key',
    )
    .option('--tls-key <file>', 'PEM private key of --tls-cert')
    .option(
      '--tls-client-ca <file>',
      'PEM CA bundle: the client API requires client certificates signed by it (nodes forward with their --tls-cert, so it must sign those too)',
    )
    .option(
      '--tls-ca <file>',
      "PEM CA bundle that signed the other nodes' --tls-cert, checked when forwarding or joining (default: --tls-client-ca if given, else the system's roots)",
    )
    .option(
      '--peer-tls-cert <file>',
      'PEM certificate (chain) of this node for mutual TLS between nodes; all three --peer-tls-* go together',
    )
    .option('--peer-tls-key <file>', 'PEM private key of --peer-tls-cert')
    .option(
      '--peer-tls-ca <file>',
      'PEM CA bundle of the cluster: only nodes whose peer certificate it signed may connect or join',
    );
}

function mergeConfig(flags: Record<string, unknown>): NodeOptions {
  let fromFile: NodeOptions = {};
  if (typeof flags['config'] === 'string') {
    const path = flags['config'];
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ValidationError('CONFIG_INVALID', [
        { field: '--config', reason: `cannot read ${path}: ${(err as Error).message}` },
      ]);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new ValidationError('CONFIG_INVALID', [
        { field: '--config', reason: `${path} is not JSON: ${(err as Error).message}` },
      ]);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new ValidationError('CONFIG_INVALID', [
        { field: '--config', reason: 'must hold a JSON object' },
      ]);
    }
    const unknown = Object.keys(parsed).filter((k) => !(k in OPTION_FLAGS));
    if (unknown.length > 0) {
      throw new ValidationError(
        'CONFIG_INVALID',
        unknown.map((k) => ({ field: `--config ${k}`, reason: 'unknown option' })),
      );
    }
    // Keys were checked above; values are checked by compileNodeOptions.
    fromFile = parsed;
  }
  const merged: Record<string, unknown> = { ...fromFile };
  for (const key of Object.keys(OPTION_FLAGS)) {
    if (flags[key] !== undefined) merged[key] = flags[key];
  }
  return merged;
}

/**
 * Plaintext stays for development on loopback, but never silently: every plaintext listener is
 * named at every start, and one bound to an address other nodes or clients can reach is flagged
 * as exposed (an error line, and on stderr).
 */
function warnPlaintext(config: CompiledNodeConfig, log: NodeLogger): void {
  for (const l of plaintextListeners(config)) {
    const fix =
      l.flag === '--peer-listen'
        ? '--peer-tls-cert/--peer-tls-key/--peer-tls-ca'
        : '--tls-cert/--tls-key';
    if (l.loopback) {
      log.warn(
        { flag: l.flag, address: l.address },
        `plaintext listener (no TLS): fine on loopback for development; give ${fix} for TLS`,
      );
    } else {
      const text =
        `${l.flag} ${l.address} serves PLAINTEXT on a non-loopback address: anyone who can ` +
        `reach it can read and ${l.flag === '--metrics-listen' ? 'scrape' : 'send'} its ` +
        `traffic unauthenticated; give ${fix} (docs/OPERATIONS.md, TLS)`;
      log.error({ flag: l.flag, address: l.address }, text);
      process.stderr.write(`tickraft: WARNING: ${text}\n`);
    }
  }
}

/** SIGHUP reads the TLS files again; a bad set is refused whole and the old one stays. */
function reloadOnHangup(config: CompiledNodeConfig, tls: NodeTls, log: NodeLogger): void {
  if (tls.api === undefined && tls.peer === undefined) return;
  process.on('SIGHUP', () => {
    try {
      const certificates = reloadNodeTls(config, tls);
      log.info({ certificates }, 'TLS files reloaded (SIGHUP): new connections use them');
    } catch (err) {
      log.error(
        err instanceof ValidationError ? { violations: err.violations } : { err: String(err) },
        'TLS reload (SIGHUP) refused: the files kept serving are the previous ones',
      );
    }
  });
}

/**
 * The HTTP/JSON API when --http-listen asks for it: started once the client API listens (each
 * request becomes a call of it, on `apiPort`), closed before it.
 */
function httpApiOf(
  config: CompiledNodeConfig,
  node: TickraftNode,
  tls: NodeTls,
  log: NodeLogger,
): { start(apiPort: number): Promise<void>; close(): Promise<void> } | undefined {
  const at = config.httpListen;
  if (at === undefined) return undefined;
  const server = new HttpApiServer({
    grpcCredentials: node.apiDialCredentials,
    tls: tls.api && { source: tls.api.server, requireClientCert: tls.api.requireClientCert },
    log,
  });
  return {
    async start(apiPort) {
      const port = await server.start(
        at.host,
        at.port,
        loopbackAddress(config.listen.host, apiPort),
      );
      const tlsOn = tls.api !== undefined;
      log.info({ httpListen: `${at.host}:${port}`, tls: tlsOn }, 'serving the HTTP API');
    },
    close: () => server.close(),
  };
}

function serve(options: NodeOptions): Promise<number> {
  const config = compileNodeOptions(options);
  const adminToken =
    config.adminTokenFile === undefined ? undefined : readAdminTokenFile(config.adminTokenFile);
  const log = pino({ base: { node: config.id } });
  if (adminToken === undefined)
    log.warn(
      {},
      "AUTHENTICATION IS OFF (--insecure-no-auth): anyone who can reach this node can read, change and delete every tenant's jobs and the cluster itself; use it on loopback only",
    );
  else if (adminToken.readableByOthers)
    log.warn(
      { file: config.adminTokenFile },
      'the admin token file can be read by other users of this machine; chmod 600 it',
    );
  // Unreadable or invalid TLS files are bad options: a ValidationError, exit 2.
  const { tls, summary } = loadNodeTls(config);
  warnPlaintext(config, log);
  if (Object.keys(summary).length > 0) log.info({ certificates: summary }, 'TLS enabled');
  reloadOnHangup(config, tls, log);
  const node = new TickraftNode(config, log, tls, adminToken?.token);
  const debug = config.debugListen === undefined ? undefined : new DebugServer(node);
  const http = httpApiOf(config, node, tls, log);
  const apiCredentials = tls.api && serverCredentials(tls.api.server, tls.api.requireClientCert);
  const auth = new Authenticator({
    adminTokenHash: adminToken === undefined ? undefined : hashToken(adminToken.token),
    tokensByHash: node.meta.tokensByHash,
    tokensById: node.meta.tokens,
    confirmMeta: () => node.host.read(META_GROUP_ID),
    clock: SystemClock,
  });
  const api = new ApiServer(
    node,
    formatHostPort(config.listen),
    config.advertiseAddress === undefined ? '' : formatHostPort(config.advertiseAddress),
    log,
    auth,
    adminToken?.token,
  );
  let stopping = false;
  const done = new Promise<number>((resolve) => {
    const stop = (signal: string): void => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'stopping: handing leaderships over');
      const hardStop = setTimeout(() => {
        log.error({}, 'graceful stop overran its bound; exiting');
        resolve(1);
      }, config.shutdownTimeoutMs + 3000);
      node
        .shutdown()
        .then(async (r) => {
          // The HTTP API calls the gRPC API: it stops first.
          await http?.close();
          await api.close();
          await debug?.close();
          // The spans still batched leave before the process does.
          await node.tracing.shutdown();
          clearTimeout(hardStop);
          log.info(r, 'stopped');
          resolve(0);
        })
        .catch((err: unknown) => {
          log.error({ err: String(err) }, 'error while stopping');
          resolve(1);
        });
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    let apiPort = 0;
    // Tracing is set up (its SDK loaded only when asked for) before the node makes the parts
    // that report spans.
    (config.otlpEndpoint === undefined
      ? Promise.resolve(NO_TRACING)
      : startTracing(config.otlpEndpoint, config.id)
    )
      .then((tracing) => {
        node.tracing = tracing;
        if (tracing.enabled) log.info({ otlpEndpoint: config.otlpEndpoint }, 'tracing on');
        return node.start(
          (err) => {
            // The loop cannot continue (e.g. the disk failed): exit and let a restart recover.
            log.error({ err: String(err) }, 'fatal');
            process.exit(1);
          },
          async () => {
            apiPort = await api.listen(formatHostPort(config.listen), apiCredentials);
            await http?.start(apiPort);
            if (debug !== undefined && config.debugListen !== undefined) {
              const debugPort = await debug.start(formatHostPort(config.debugListen));
              log.warn(
                { debugListen: `${config.debugListen.host}:${debugPort}` },
                'serving the test-only DebugService: unauthenticated, it reads and writes this ' +
                  "node's internals; never expose it outside a test machine",
              );
            }
          },
        );
      })
      .then(() => {
        api.start();
        log.info(
          { listen: `${config.listen.host}:${apiPort}`, tls: tls.api !== undefined },
          'serving',
        );
      })
      .catch(async (err: unknown) => {
        // node.start released what it opened; the client API and debug servers are ours to close.
        await http?.close();
        await api.close();
        await debug?.close();
        const code = (err as { code?: unknown }).code;
        // A wrapped cause says what the system refused (e.g. EADDRINUSE behind a bind failure).
        const message = err instanceof Error ? err.message : String(err);
        const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : '';
        const text =
          `${typeof code === 'string' ? `${code}: ` : ''}${message}` +
          `${cause === '' || message.includes(cause) ? '' : ` (${cause})`}`;
        log.error({ err: text }, 'cannot start');
        process.stderr.write(`tickraft: cannot start: ${text}\n`);
        // Everything is closed, so the process ends by itself; should a library still hold
        // the event loop, it must not keep a node that cannot serve running.
        setTimeout(() => process.exit(1), 2000).unref();
        resolve(1);
      });
  });
  return done;
}

export async function runTickraft(argv: readonly string[]): Promise<number> {
  const program = buildProgram(serve);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    if (err instanceof ValidationError) {
      for (const v of err.violations) process.stderr.write(`tickraft: ${v.field}: ${v.reason}\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`tickraft: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
