/**
 * `npm run chaos:check -- <history.jsonl> [more.jsonl…] [--json]`: checks a chaos run's history
 * offline (docs/chaos-checker.md) and prints the summary table, or the whole report as JSON.
 * Exit status: 0 ok, 1 a violation was found, 3 no violation but a linearizability search hit
 * its step cap (not proven), 2 the history could not be read.
 */
import { Command } from 'commander';
import { ValidationError } from '../src/base/errors.js';
import { checkHistory } from './checker/check-history.js';
import { renderSummary } from './checker/summary.js';
import { readHistoryFiles } from './history/jsonl.js';

const EXIT = { ok: 0, violations: 1, unreadable: 2, unknown: 3 } as const;

interface Flags {
  readonly json?: boolean;
  readonly examples: string;
  readonly stepsMax: string;
}

function positiveInt(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) {
    process.stderr.write(`chaos:check: ${flag} must be a positive integer, got '${text}'\n`);
    process.exit(EXIT.unreadable);
  }
  return n;
}

const program = new Command()
  .name('chaos:check')
  .description(
    'Check a chaos history (JSON lines from the driver, the sink and the nemesis runner) against ' +
      "tickraft's invariants; see docs/chaos-checker.md.",
  )
  .argument('<files...>', 'history files; records of all of them are checked together')
  .option('--json', 'print the whole report as JSON instead of the table')
  .option('--examples <n>', 'examples kept per violation kind', '5')
  .option('--steps-max <n>', 'linearizability search steps per job before "unknown"', '1000000')
  .addHelpText(
    'after',
    '\nExit status: 0 ok, 1 violations, 2 unreadable history, 3 not proven (step cap).',
  )
  .action((files: string[], flags: Flags) => {
    let read;
    try {
      read = readHistoryFiles(files);
    } catch (err) {
      const text =
        err instanceof ValidationError
          ? err.violations.map((v) => `  ${v.field}: ${v.reason}`).join('\n')
          : `  ${(err as Error).message}`;
      process.stderr.write(`chaos:check: cannot read the history\n${text}\n`);
      process.exit(EXIT.unreadable);
    }
    for (const f of read.tornFiles)
      process.stderr.write(`chaos:check: ${f}: torn last line dropped\n`);
    let report;
    try {
      report = checkHistory(read.records, {
        examplesMax: positiveInt(flags.examples, '--examples'),
        linearizability: { partitionStepsMax: positiveInt(flags.stepsMax, '--steps-max') },
      });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      const text = err.violations.map((v) => `  ${v.field}: ${v.reason}`).join('\n');
      process.stderr.write(`chaos:check: the history is malformed\n${text}\n`);
      process.exit(EXIT.unreadable);
    }
    process.stdout.write(
      flags.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderSummary(report)}\n`,
    );
    process.exitCode = EXIT[report.verdict === 'ok' ? 'ok' : report.verdict];
  });

program.parse();
