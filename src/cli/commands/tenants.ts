/**
 * `tickctl tenants …`: tenants own jobs and the secrets their webhooks are signed with.
 */
import { Command } from 'commander';
import type { CliRun } from '../io.js';
import {
  EXIT_CODES_HELP,
  iso,
  text,
  printJson,
  remote,
  table,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

const HEADER = ['ID', 'SECRETS', 'INFLIGHT MAX', 'PREVIOUS SECRET UNTIL', 'UPDATED'];

function rows(tenants: Obj[]): string[][] {
  return tenants.map((t) => [
    text(t['id']),
    ((t['secretHints'] as string[] | undefined) ?? []).join(' '),
    text(t['inflightMax']),
    t['previousSecretUntilMs'] === undefined ? '-' : iso(t['previousSecretUntilMs']),
    iso(t['updatedAtMs']),
  ]);
}

function show(run: CliRun, o: RemoteOptions, t: Obj): void {
  if (o.json === true) printJson(run, t);
  else table(run, HEADER, rows([t]));
}

export function registerTenantsCommand(program: Command, run: CliRun): void {
  const tenants = new Command('tenants').description('create and manage tenants');
  tenants.addHelpText('after', EXIT_CODES_HELP);

  remote(tenants.command('create'))
    .description('create a tenant; prints its signing secret (generated unless --secret)')
    .argument('<tenant-id>', '1-63 of a-z 0-9 _ -')
    .option('--secret <whsec>', 'signing secret: whsec_ + base64 of 24-64 bytes')
    .option('--inflight-max <n>', 'deliveries of this tenant in flight per node (default 1000)')
    .action(
      async (tenantId: string, o: RemoteOptions & { secret?: string; inflightMax?: string }) =>
        withClient(run, o, async (c) => {
          const req: Obj = { tenantId, signingSecret: o.secret ?? '' };
          if (o.inflightMax !== undefined)
            req['inflightMax'] = wholeNumber('--inflight-max', o.inflightMax, 1);
          const res = await c.call<Obj>('TenantService', 'CreateTenant', req);
          if (o.json === true) return printJson(run, res);
          table(run, HEADER, rows([res['tenant'] as Obj]));
          run.io.writeOut(`signing secret (shown once): ${text(res['signingSecret'])}\n`);
        }),
    );

  remote(tenants.command('get'))
    .description('show a tenant')
    .argument('<tenant-id>')
    .action(async (tenantId: string, o: RemoteOptions) =>
      withClient(run, o, async (c) =>
        show(run, o, await c.call<Obj>('TenantService', 'GetTenant', { tenantId })),
      ),
    );

  remote(tenants.command('update'))
    .description("change a tenant's caps")
    .argument('<tenant-id>')
    .requiredOption('--inflight-max <n>', 'deliveries of this tenant in flight per node')
    .action(async (tenantId: string, o: RemoteOptions & { inflightMax: string }) =>
      withClient(run, o, async (c) =>
        show(
          run,
          o,
          await c.call<Obj>('TenantService', 'UpdateTenant', {
            tenantId,
            inflightMax: wholeNumber('--inflight-max', o.inflightMax, 1),
          }),
        ),
      ),
    );

  remote(tenants.command('rotate-secret'))
    .description('make a new signing secret current; the old one also signs during the grace')
    .argument('<tenant-id>')
    .option('--secret <whsec>', 'the new secret (generated when absent)')
    .option(
      '--grace-ms <ms>',
      'how long the old secret keeps signing (default 86400000; 0: stop now)',
    )
    .action(async (tenantId: string, o: RemoteOptions & { secret?: string; graceMs?: string }) =>
      withClient(run, o, async (c) => {
        const req: Obj = { tenantId, newSecret: o.secret ?? '' };
        if (o.graceMs !== undefined) req['gracePeriodMs'] = wholeNumber('--grace-ms', o.graceMs);
        const res = await c.call<Obj>('TenantService', 'RotateSecret', req);
        if (o.json === true) return printJson(run, res);
        table(run, HEADER, rows([res['tenant'] as Obj]));
        run.io.writeOut(`new signing secret (shown once): ${text(res['newSecret'])}\n`);
      }),
    );

  remote(tenants.command('list'))
    .description('every tenant, by id')
    .option('--page-size <n>', 'tenants per page (1-1000)', '100')
    .option('--page-token <token>', 'continue after a previous page')
    .action(async (o: RemoteOptions & { pageSize: string; pageToken?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('TenantService', 'ListTenants', {
          pageSize: wholeNumber('--page-size', o.pageSize, 1),
          pageToken: o.pageToken ?? '',
        });
        if (o.json === true) return printJson(run, res);
        table(run, HEADER, rows(res['tenants'] as Obj[]));
        const token = text(res['nextPageToken'] ?? '');
        if (token !== '') run.io.writeErr(`more: --page-token ${token}\n`);
      }),
    );
  program.addCommand(tenants);
}
