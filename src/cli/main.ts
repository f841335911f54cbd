/**
 * tickctl: the command-line tool. This file builds the commander program and maps its outcomes
 * to exit codes; each noun lives in its own file under commands/ (preview, jobs, runs and dlq,
 * tenants, tokens, cluster and leader, the demo webhook sink, the pull-based worker) and registers itself
 * on the program.
 *
 * Exit codes: 0 success, 1 unexpected failure, 2 bad usage or invalid input, 3 not found,
 * 4 conflict, 5 cluster unavailable or deadline exceeded, 6 refused credentials
 * (src/cli/remote.ts).
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Command, CommanderError } from 'commander';
import { SystemClock } from '../base/clock.js';
import { packageVersion } from '../config/version.js';
import { registerClusterCommands } from './commands/cluster.js';
import { registerJobsCommand } from './commands/jobs.js';
import { registerPreviewCommand } from './commands/preview.js';
import { registerRunsCommands } from './commands/runs.js';
import { registerSinkCommand } from './commands/sink.js';
import { registerTenantsCommand } from './commands/tenants.js';
import { registerTokensCommand } from './commands/tokens.js';
import { registerWorkerCommand } from './commands/worker.js';
import { acceptConnectionOptionsFirst, EXIT_CODES_HELP, TOKEN_HELP } from './remote.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from './io.js';
import type { CliIo, CliRun } from './io.js';

let pipeHandled = false;

/**
 * Output piped into a reader that stops early (`tickctl cluster status | head`): the pipe's
 * EPIPE ends tickctl quietly, as a Unix tool does, instead of an unhandled error event.
 */
function quietOnClosedPipe(): void {
  if (pipeHandled) return;
  pipeHandled = true;
  for (const stream of [process.stdout, process.stderr])
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0);
      throw err;
    });
}

const processIo: CliIo = {
  writeOut: (text) => {
    process.stdout.write(text);
  },
  writeErr: (text) => {
    process.stderr.write(text);
  },
  clock: SystemClock,
};

export function buildProgram(run: CliRun): Command {
  const program = new Command('tickctl')
    .description('tickctl: inspect schedules and operate a tickraft cluster')
    .configureOutput({ writeOut: run.io.writeOut, writeErr: run.io.writeErr })
    .showHelpAfterError('(run with --help for usage)')
    // Commander would call process.exit itself; throwing lets runTickctl pick the exit code.
    .exitOverride()
    .version(packageVersion(), '--version', 'print the version of tickctl and exit');
  registerPreviewCommand(program, run);
  registerJobsCommand(program, run);
  registerRunsCommands(program, run);
  registerTenantsCommand(program, run);
  registerTokensCommand(program, run);
  registerClusterCommands(program, run);
  registerSinkCommand(program, run);
  registerWorkerCommand(program, run);
  program.addHelpText(
    'after',
    `
Commands that call a cluster take --endpoint host:port (any node; default 127.0.0.1:7001, or
TICKCTL_ENDPOINT) or --endpoints host:port,... (tried in order; TICKCTL_ENDPOINTS), --json and
--timeout-ms, after the command or before it (tickctl --endpoints a:7001,b:7001 jobs get J).
${TOKEN_HELP}
A cluster started with --tls-cert serves only TLS: give --ca-file (the CA of the nodes'
certificates), and --cert-file/--key-file when it requires client certificates (--tls-client-ca);
or TICKCTL_CA_FILE, TICKCTL_CERT_FILE, TICKCTL_KEY_FILE. tickctl worker takes them too.
${EXIT_CODES_HELP}`,
  );
  acceptConnectionOptionsFirst(program);
  inheritUsageHandling(program, run);
  return program;
}

/**
 * Commander copies these settings only to subcommands made with .command() on a command that
 * already has them; nouns are built on their own and added, so without this walk a usage error
 * in `jobs list` would make commander call process.exit(1) itself instead of the documented 2.
 */
function inheritUsageHandling(cmd: Command, run: CliRun): void {
  for (const sub of cmd.commands) {
    sub
      .configureOutput({ writeOut: run.io.writeOut, writeErr: run.io.writeErr })
      .showHelpAfterError('(run with --help for usage)')
      .exitOverride();
    inheritUsageHandling(sub, run);
  }
}

/** Runs tickctl with `argv` (without node and script) and returns the exit code. */
export async function runTickctl(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  if (io === processIo) quietOnClosedPipe();
  const run: CliRun = { io, exitCode: EXIT_OK };
  const program = buildProgram(run);
  if (argv.length === 0) {
    io.writeErr(program.helpInformation());
    return EXIT_USAGE;
  }
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return run.exitCode;
  } catch (err) {
    // Commander has already printed its message (usage errors) or the help/version text.
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT_OK : EXIT_USAGE;
    io.writeErr(`tickctl: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT_FAILURE;
  }
}

function isEntryModule(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return pathToFileURL(realpathSync(entry)).href === import.meta.url;
  } catch {
    // An entry path that cannot be resolved is not this file.
    return false;
  }
}

// `node --import tsx src/cli/main.ts …` runs the tool directly; bin/tickctl imports it instead.
if (isEntryModule()) {
  process.exitCode = await runTickctl(process.argv.slice(2));
}
