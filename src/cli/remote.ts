/**
 * What every tickctl command that talks to a cluster shares: the --endpoint, --json and
 * --timeout-ms options, one API client per invocation, tables for people, JSON for scripts, and
 * the mapping of API errors to messages that say what to fix and to exit codes.
 *
 * Exit codes: 0 ok; 1 unexpected failure; 2 bad usage or invalid input (nothing was written);
 * 3 not found; 4 conflict (exists already, version changed, wrong state); 5 the cluster could not
 * answer in time or had no leader (safe to retry; creates with a request id are idempotent).
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import * as grpc from '@grpc/grpc-js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { ApiCallError, ApiClient, type ClientTlsOptions } from '../api/client.js';
import { parseInstant } from '../schedule/iso.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type CliRun } from './io.js';

export const EXIT_NOT_FOUND = 3;
export const EXIT_CONFLICT = 4;
export const EXIT_UNAVAILABLE = 5;
export const EXIT_DENIED = 6;
/** A tenant limit: its API write rate (retry after the delay given) or its max jobs. */
export const EXIT_OVER_LIMIT = 7;
export const DEFAULT_ENDPOINT = '127.0.0.1:7001';

export const EXIT_CODES_HELP = `
Exit codes:
  0  success
  1  unexpected failure
  2  bad usage or invalid input (nothing was written)
  3  not found
  4  conflict: already exists, version changed, or wrong state
  5  the cluster did not answer in time or had no leader (safe to retry)
  6  refused: no token, an unknown or revoked one, or one whose role or tenant does not cover the call
  7  over a tenant limit: its API write rate (retry after the delay printed) or its max jobs`;

/** Where \`npm start\` writes its admin token, and where tickctl looks when given none. */
export function defaultTokenFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(env['TICKRAFT_HOME'] ?? '.tickraft', 'admin.token');
}

export const TOKEN_HELP = `
Credentials: the token comes from --token-file FILE, else the TICKRAFT_TOKEN environment
variable, else ${defaultTokenFile({})} (written by \`npm start\`; TICKRAFT_HOME moves it) when it exists.`;

/** The TLS files of a command that calls the cluster (--ca-file, --cert-file, --key-file). */
export interface TlsFlags {
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

export interface RemoteOptions extends TlsFlags {
  readonly endpoint: string;
  readonly endpoints?: string;
  readonly json?: boolean;
  readonly timeoutMs: string;
  readonly tokenFile?: string;
}

/**
 * Adds --ca-file, --cert-file and --key-file: with --ca-file the command dials with TLS,
 * trusting that CA for the nodes' certificates; --cert-file and --key-file add a client
 * certificate, for a cluster started with --tls-client-ca.
 */
export function tlsOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option(
        '--ca-file <pem>',
        "dial with TLS, trusting this CA bundle for the nodes' certificates (a cluster started with --tls-cert)",
      ).env('TICKCTL_CA_FILE'),
    )
    .addOption(
      new Option(
        '--cert-file <pem>',
        'client certificate to present (a cluster started with --tls-client-ca); needs --key-file and --ca-file',
      ).env('TICKCTL_CERT_FILE'),
    )
    .addOption(
      new Option('--key-file <pem>', 'private key of --cert-file').env('TICKCTL_KEY_FILE'),
    );
}

/**
 * The TLS options of the flags, read from their files; undefined without --ca-file
 * (plaintext). Throws a UsageError naming the flag for a missing partner or a file that cannot
 * be read or holds no PEM of the right kind.
 */
export function readTlsFlags(flags: TlsFlags): ClientTlsOptions | undefined {
  const { caFile, certFile, keyFile } = flags;
  if (certFile !== undefined && keyFile === undefined)
    throw new UsageError('--cert-file needs --key-file (the private key of the certificate)');
  if (keyFile !== undefined && certFile === undefined)
    throw new UsageError('--key-file needs --cert-file (the certificate the key belongs to)');
  if (caFile === undefined) {
    if (certFile !== undefined)
      throw new UsageError(
        "--cert-file needs --ca-file: TLS is on only with the CA that signed the nodes' certificates",
      );
    return undefined;
  }
  const read = (flag: string, file: string, marker: RegExp, what: string): Buffer => {
    let pem: Buffer;
    try {
      pem = readFileSync(file);
    } catch (err) {
      throw new UsageError(
        `${flag}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    if (!marker.test(pem.toString('latin1')))
      throw new UsageError(`${flag}: ${file} holds no PEM ${what}`);
    return pem;
  };
  const CERT = /-----BEGIN CERTIFICATE-----/;
  const tls: ClientTlsOptions = {
    ca: read('--ca-file', caFile, CERT, 'certificate'),
    ...(certFile !== undefined && keyFile !== undefined
      ? {
          cert: read('--cert-file', certFile, CERT, 'certificate'),
          key: read('--key-file', keyFile, /-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'private key'),
        }
      : {}),
  };
  try {
    createSecureContext(tls);
  } catch (err) {
    const flags = certFile !== undefined ? '--ca-file, --cert-file, --key-file' : '--ca-file';
    throw new UsageError(`${flags}: not usable for TLS: ${(err as Error).message}`);
  }
  // Node warns (DEP0123) at the first TLS connection to an IP address, because grpc-js names
  // the IP as the TLS server name; the user of a command can do nothing about it.
  process.noDeprecation = true;
  return tls;
}

/** Adds --endpoint, --json, --timeout-ms and the TLS files to a command that calls the cluster. */
export function remote(cmd: Command): Command {
  cmd
    .addOption(
      new Option(
        '--endpoint <host:port>',
        'any node of the cluster (client API address); a comma-separated list works as --endpoints',
      )
        .env('TICKCTL_ENDPOINT')
        .default(DEFAULT_ENDPOINT),
    )
    .addOption(
      new Option(
        '--endpoints <host:port,...>',
        'several nodes, tried in order until one accepts a connection (instead of --endpoint)',
      ).env('TICKCTL_ENDPOINTS'),
    )
    .option(
      '--token-file <file>',
      'file holding the bearer token to call with (else TICKRAFT_TOKEN, else .tickraft/admin.token if it exists)',
    )
    .option('--json', 'print the API response as JSON (errors as JSON on stderr)')
    .option('--timeout-ms <ms>', 'deadline of each call', '10000');
  return tlsOptions(cmd);
}

/**
 * The bearer token for a command: --token-file, else TICKRAFT_TOKEN, else the file `npm start`
 * writes when it exists, else none (a cluster run with --insecure-no-auth needs none).
 */
export function tokenFor(
  opts: { tokenFile?: string | undefined },
  env = process.env,
): string | undefined {
  const fromFile = (path: string, what: string): string => {
    let content: string;
    try {
      content = readFileSync(path, 'utf8');
    } catch (err) {
      throw new UsageError(`${what}: cannot read ${path}: ${(err as Error).message}`);
    }
    const token = content.trim();
    if (token === '' || /\s/.test(token))
      throw new UsageError(`${what}: ${path} must hold one token on one line`);
    return token;
  };
  if (opts.tokenFile !== undefined) return fromFile(opts.tokenFile, '--token-file');
  const fromEnv = env['TICKRAFT_TOKEN'];
  if (fromEnv !== undefined && fromEnv !== '') {
    const token = fromEnv.trim();
    if (/\s/.test(token)) throw new UsageError('TICKRAFT_TOKEN must hold one token, no spaces');
    return token;
  }
  const fallback = defaultTokenFile(env);
  return existsSync(fallback) ? fromFile(fallback, `the default token file`) : undefined;
}

/** The options `remote` adds, as the program also takes them before the command. */
const CONNECTION_FLAGS = [
  '--endpoint <host:port>',
  '--endpoints <host:port,...>',
  '--timeout-ms <ms>',
  '--token-file <file>',
  '--json',
  '--ca-file <pem>',
  '--cert-file <pem>',
  '--key-file <pem>',
] as const;

/**
 * Lets the connection options also come before the command, as etcdctl and kubectl take theirs:
 * `tickctl --endpoints a:1,b:2 jobs get J`. Given there, each is handed to the command that runs
 * as if it had been given to it; given in both places, or to a command that does not call a
 * cluster, it is a usage error rather than one silently winning.
 */
export function acceptConnectionOptionsFirst(program: Command): void {
  program
    // Without this the program would also take these flags after the command's name.
    .enablePositionalOptions();
  const options = CONNECTION_FLAGS.map((flags) => new Option(flags).hideHelp());
  for (const option of options) program.addOption(option);
  program.hook('preAction', (_program, action) => {
    for (const option of options) {
      const key = option.attributeName();
      const flag = option.long!;
      if (program.getOptionValueSource(key) !== 'cli') continue;
      const name = action.name();
      if (!action.options.some((o) => o.attributeName() === key)) {
        action.error(`error: ${flag} does not apply to '${name}', which calls no cluster`, {
          exitCode: EXIT_USAGE,
          code: 'tickctl.connectionOption',
        });
      }
      if (action.getOptionValueSource(key) === 'cli') {
        action.error(`error: ${flag} given both before and after '${name}'; give it once`, {
          exitCode: EXIT_USAGE,
          code: 'tickctl.connectionOption',
        });
      }
      action.setOptionValueWithSource(key, program.getOptionValue(key), 'cli');
    }
    chooseEndpointSource(action);
  });
}

/**
 * --endpoint and --endpoints name the same thing: a flag wins over the other's environment
 * variable (as any flag wins over its own), and two of the same kind are refused.
 */
function chooseEndpointSource(action: Command): void {
  const single = action.getOptionValueSource('endpoint');
  const list = action.getOptionValueSource('endpoints');
  const fail = (message: string): never =>
    action.error(`error: ${message}`, {
      exitCode: EXIT_USAGE,
      code: 'tickctl.conflictingEndpoints',
    });
  if (single === 'cli' && list === 'cli') fail('give --endpoint or --endpoints, not both');
  if (single === 'env' && list === 'env')
    fail('TICKCTL_ENDPOINT and TICKCTL_ENDPOINTS are both set; unset one');
  if (single === 'cli' && list === 'env')
    action.setOptionValueWithSource('endpoints', undefined, 'default');
}

/** host:port, host:port or [v6]:port; the host itself is checked by the connection. */
const ENDPOINT_SHAPE = /^(\[[0-9A-Fa-f:.]+\]|[^\s:,[\]]+):\d{1,5}$/;

/** A usage problem found before calling the cluster. */
export class UsageError extends Error {
  readonly code = 'CLI_USAGE';
}

/**
 * `--tenant <id>` on a command that names a job, a run or a tenant's jobs: job ids are unique per
 * tenant, so the tenant is part of the name. Checked by tenantOf, not by commander, so that the
 * flag can become optional in one place.
 */
export function tenantOption(cmd: Command, what: string): Command {
  return cmd.option('--tenant <id>', `${what} (required: job ids are unique per tenant)`);
}

/**
 * The tenant a command acts as: its --tenant, which is required (a usage error, nothing sent,
 * when missing). The cluster decides in the end (src/api/tenant-scope.ts).
 */
export function tenantOf(o: { readonly tenant?: string }): string {
  if (o.tenant === undefined || o.tenant === '')
    throw new UsageError(
      "required option '--tenant <id>' not specified (job ids are unique per tenant)",
    );
  return o.tenant;
}

/**
 * Runs `body` with a client for the options' endpoint and turns what it throws into output and
 * an exit code.
 */
export async function withClient(
  run: CliRun,
  opts: RemoteOptions,
  body: (client: ApiClient) => Promise<void>,
): Promise<void> {
  const timeoutMs = Number(opts.timeoutMs);
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
    run.io.writeErr(`tickctl: --timeout-ms must be a positive whole number of ms\n`);
    run.exitCode = EXIT_USAGE;
    return;
  }
  const flag = opts.endpoints !== undefined ? '--endpoints' : '--endpoint';
  const endpoints = (opts.endpoints ?? opts.endpoint).split(',').map((e) => e.trim());
  const bad = endpoints.find((e) => !ENDPOINT_SHAPE.test(e));
  if (bad !== undefined) {
    run.io.writeErr(
      `tickctl: ${flag}: '${bad}' is not host:port (several are separated by commas, no spaces)\n`,
    );
    run.exitCode = EXIT_USAGE;
    return;
  }
  let client: ApiClient;
  try {
    client = new ApiClient(
      endpoints,
      timeoutMs,
      {},
      { token: tokenFor(opts), tls: readTlsFlags(opts) },
    );
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    run.io.writeErr(`tickctl: ${err.message}\n`);
    run.exitCode = EXIT_USAGE;
    return;
  }
  try {
    await body(client);
    run.exitCode = EXIT_OK;
  } catch (err) {
    run.exitCode = report(run, opts, err);
  } finally {
    client.close();
  }
}

function report(run: CliRun, opts: RemoteOptions, err: unknown): number {
  if (err instanceof UsageError) {
    run.io.writeErr(`tickctl: ${err.message}\n`);
    return EXIT_USAGE;
  }
  if (!(err instanceof ApiCallError)) throw err;
  if (opts.json === true) {
    run.io.writeErr(
      `${JSON.stringify({ error: { status: grpc.status[err.status], code: err.code, message: err.message, violations: err.violations } })}\n`,
    );
  } else {
    run.io.writeErr(
      `tickctl: ${describe(err, opts.endpoints ?? opts.endpoint, opts.caFile !== undefined)}\n`,
    );
    for (const v of err.violations) run.io.writeErr(`  ${v.field}: ${v.reason}\n`);
  }
  switch (err.status) {
    case grpc.status.INVALID_ARGUMENT:
      return EXIT_USAGE;
    case grpc.status.NOT_FOUND:
      return EXIT_NOT_FOUND;
    case grpc.status.ALREADY_EXISTS:
    case grpc.status.ABORTED:
    case grpc.status.FAILED_PRECONDITION:
      return EXIT_CONFLICT;
    case grpc.status.UNAVAILABLE:
    case grpc.status.DEADLINE_EXCEEDED:
      return EXIT_UNAVAILABLE;
    case grpc.status.UNAUTHENTICATED:
    case grpc.status.PERMISSION_DENIED:
      return EXIT_DENIED;
    case grpc.status.RESOURCE_EXHAUSTED:
      return EXIT_OVER_LIMIT;
    default:
      return EXIT_FAILURE;
  }
}

/** grpc-js's connection failure text without its timestamp and empty resolution note. */
function grpcDetails(message: string): string {
  return message
    .replace(/\s*\(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g, '')
    .replace(/\.?\s*Resolution note:\s*$/, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** What to check when a connection failed, with or without TLS. */
function tlsHint(tls: boolean): string {
  return tls
    ? "With TLS: --ca-file must hold the CA that signed the nodes' certificates, and a cluster started with --tls-client-ca refuses a client without --cert-file/--key-file signed by its CA."
    : 'A cluster started with --tls-cert serves only TLS: give --ca-file.';
}

function describe(err: ApiCallError, endpoint: string, tls: boolean): string {
  switch (err.status) {
    case grpc.status.INVALID_ARGUMENT:
      return `invalid input (${err.code}); fix these fields:`;
    case grpc.status.ABORTED:
      return `${err.message} (someone changed it meanwhile: read it again and retry)`;
    case grpc.status.UNAVAILABLE:
      if (err.code === 'UNAVAILABLE')
        return (
          `cannot reach ${endpoint}: is a node running there? (--endpoint, --endpoints, ` +
          `TICKCTL_ENDPOINT): ${grpcDetails(err.message)}. ${tlsHint(tls)}`
        );
      return `${err.message} (retry${err.retryDelayMs !== undefined ? ` in ${err.retryDelayMs} ms` : ''})`;
    case grpc.status.DEADLINE_EXCEEDED:
      return `no answer within the deadline (${err.message}); retry or raise --timeout-ms`;
    case grpc.status.UNAUTHENTICATED:
      return `the cluster refused the credentials: ${err.message} (give a token with --token-file FILE or TICKRAFT_TOKEN; \`npm start\` writes ${defaultTokenFile()})`;
    case grpc.status.PERMISSION_DENIED:
      return `not allowed: ${err.message}`;
    case grpc.status.RESOURCE_EXHAUSTED:
      return `over a tenant limit: ${err.message} (tickctl tenants get shows usage and limits)`;
    default:
      return `${err.message} (${err.code})`;
  }
}

export function printJson(run: CliRun, value: unknown): void {
  run.io.writeOut(`${JSON.stringify(value, null, 2)}\n`);
}

/** A plain text table: a header row and left-aligned columns two spaces apart. */
export function table(run: CliRun, header: readonly string[], rows: readonly string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  run.io.writeOut(`${[line(header), ...rows.map(line)].join('\n')}\n`);
}

/** `RUN_STATUS_DEAD` → `DEAD`, `MISFIRE_POLICY_FIRE_ONCE` → `fire_once` (lower: policies). */
export function enumText(value: unknown, prefix: string, lower = false): string {
  const s = text(value);
  const bare = s.startsWith(prefix) ? s.slice(prefix.length) : s;
  return lower ? bare.toLowerCase() : bare;
}

/** `fire_once` → `MISFIRE_POLICY_FIRE_ONCE` (for a value a choiceOption already checked). */
export function enumValue(text: string, prefix: string): string {
  return `${prefix}${text.toUpperCase()}`;
}

/**
 * An option that takes one of `allowed` (in any letter case; the value is given back as listed),
 * shown in its --help. Anything else is a usage error naming the flag and the allowed values:
 * exit 2 and nothing is sent, never a default in place of a mistyped value.
 */
export function choiceOption(
  flags: string,
  description: string,
  allowed: readonly string[],
): Option {
  const option = new Option(flags, description).choices(allowed);
  return option.argParser((value: string) => {
    const found = allowed.find((a) => a.toLowerCase() === value.toLowerCase());
    if (found === undefined)
      throw new InvalidArgumentError(`Allowed values are ${allowed.join(', ')}.`);
    return found;
  });
}

export function instant(option: string, text: string): number {
  const r = parseInstant(text);
  if (!r.ok)
    throw new UsageError(
      `${option}: '${text}' is not an ISO instant (e.g. 2025-07-01T09:00:00Z): ${r.problems.map((p) => p.reason).join('; ')}`,
    );
  return r.ms;
}

export function wholeNumber(option: string, text: string, min = 0): number {
  const n = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isSafeInteger(n) || n < min)
    throw new UsageError(`${option}: '${text}' is not a whole number${min > 0 ? ` ≥ ${min}` : ''}`);
  return n;
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** A duration such as `90s`, `36h` or `14d` (units ms, s, m, h, d), in ms. */
export function durationMs(option: string, text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  const n = m ? Number(m[1]) * (DURATION_UNITS_MS[m[2]!] ?? NaN) : NaN;
  if (!Number.isSafeInteger(n))
    throw new UsageError(
      `${option}: '${text}' is not a duration: a whole number with a unit, ms, s, m, h or d (e.g. 36h, 14d)`,
    );
  return n;
}

/** Repeatable option values collected into a list. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function iso(ms: unknown): string {
  return typeof ms === 'number' ? new Date(ms).toISOString() : '-';
}

/** A response field as text: strings, numbers and booleans as they are, anything else empty. */
export function text(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : '';
}
