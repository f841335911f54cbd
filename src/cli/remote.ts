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
import { ApiCallError, ApiClient } from '../api/client.js';
import { parseInstant } from '../schedule/iso.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type CliRun } from './io.js';

export const EXIT_NOT_FOUND = 3;
export const EXIT_CONFLICT = 4;
export const EXIT_UNAVAILABLE = 5;
export const DEFAULT_ENDPOINT = '127.0.0.1:7001';

export const EXIT_CODES_HELP = `
Exit codes:
  0  success
  1  unexpected failure
  2  bad usage or invalid input (nothing was written)
  3  not found
  4  conflict: already exists, version changed, or wrong state
  5  the cluster did not answer in time or had no leader (safe to retry)`;

export interface RemoteOptions {
  readonly endpoint: string;
  readonly endpoints?: string;
  readonly json?: boolean;
  readonly timeoutMs: string;
}

/** Adds --endpoint, --json and --timeout-ms to a command that calls the cluster. */
export function remote(cmd: Command): Command {
  return cmd
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
    .option('--json', 'print the API response as JSON (errors as JSON on stderr)')
    .option('--timeout-ms <ms>', 'deadline of each call', '10000');
}

/** The options `remote` adds, as the program also takes them before the command. */
const CONNECTION_FLAGS = [
  '--endpoint <host:port>',
  '--endpoints <host:port,...>',
  '--timeout-ms <ms>',
  '--json',
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
  const client = new ApiClient(endpoints, timeoutMs);
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
    run.io.writeErr(`tickctl: ${describe(err, opts.endpoints ?? opts.endpoint)}\n`);
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
    default:
      return EXIT_FAILURE;
  }
}

function describe(err: ApiCallError, endpoint: string): string {
  switch (err.status) {
    case grpc.status.INVALID_ARGUMENT:
      return `invalid input (${err.code}); fix these fields:`;
    case grpc.status.ABORTED:
      return `${err.message} (someone changed it meanwhile: read it again and retry)`;
    case grpc.status.UNAVAILABLE:
      if (err.code === 'UNAVAILABLE')
        return `cannot reach ${endpoint}: is a node running there? (--endpoint, --endpoints, TICKCTL_ENDPOINT): ${err.message}`;
      return `${err.message} (retry${err.retryDelayMs !== undefined ? ` in ${err.retryDelayMs} ms` : ''})`;
    case grpc.status.DEADLINE_EXCEEDED:
      return `no answer within the deadline (${err.message}); retry or raise --timeout-ms`;
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
