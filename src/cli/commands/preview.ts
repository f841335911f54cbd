/**
 * `tickctl preview '<schedule>'`: the next fire instants of a schedule, computed locally with the
 * same code the cluster uses, so a user can check a cron line, its zone and its DST behaviour
 * before creating a job. Needs no cluster.
 */
import type { Command } from 'commander';
import type { CliRun } from '../io.js';

/** A preview is for reading; a larger listing belongs in a script over the API. */
export const PREVIEW_COUNT_MAX = 1000;
const PREVIEW_COUNT_DEFAULT = 5;

export interface PreviewOptions {
  readonly tz: string;
  readonly from?: string;
  readonly count: string;
  readonly anchor?: string;
  readonly json?: boolean;
}

export function registerPreviewCommand(program: Command, run: CliRun): void {
  program
    .command('preview')
    .description('print the next fire instants (UTC) of a schedule, computed locally')
    .argument('<schedule>', "cron (5 or 6 fields, @daily …), 'every 90s' or 'at 2025-07-01T09:00'")
    .option('--tz <zone>', 'IANA time zone the schedule is read in', 'UTC')
    .option('--from <instant>', 'list fires strictly after this ISO instant (default: now)')
    .option(
      '--count <n>',
      `how many fire instants (1-${PREVIEW_COUNT_MAX})`,
      String(PREVIEW_COUNT_DEFAULT),
    )
    .option('--anchor <instant>', "first fire of an 'every' schedule (default: --from)")
    .option('--json', 'print a JSON array (errors as a JSON object on stderr)')
    .action(async (schedule: string, options: PreviewOptions) => {
      const { preview } = await import('./preview-run.js');
      preview(run, schedule, options);
    });
}
