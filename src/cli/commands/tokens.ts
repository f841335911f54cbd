/**
 * `tickctl tokens …`: API tokens (admin only). A token is printed once, when it is created; the
 * cluster keeps only its hash, so listings show an id and a hint.
 */
import { Command } from 'commander';
import { TENANT_ROLES, TOKEN_ROLES } from '../../auth/principal.js';
import type { CliRun } from '../io.js';
import {
  choiceOption,
  EXIT_CODES_HELP,
  iso,
  printJson,
  remote,
  table,
  text,
  TOKEN_HELP,
  UsageError,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

const HEADER = ['ID', 'HINT', 'TENANT', 'ROLE', 'CREATED', 'CREATED BY', 'DESCRIPTION'];

function rows(tokens: Obj[]): string[][] {
  return tokens.map((t) => [
    text(t['id']),
    text(t['hint']),
    text(t['tenant']) || '-',
    text(t['role']),
    iso(t['createdAtMs']),
    text(t['createdBy']),
    text(t['description']),
  ]);
}

export function registerTokensCommand(program: Command, run: CliRun): void {
  const tokens = new Command('tokens').description(
    'create, list and revoke API tokens (needs an admin token)',
  );
  tokens.addHelpText('after', `${TOKEN_HELP}\n${EXIT_CODES_HELP}`);

  remote(tokens.command('create'))
    .description(
      `issue a token and print it (shown once): a tenant's ${TENANT_ROLES.join(', ')} token, or with --role admin and no --tenant an admin token`,
    )
    .addOption(
      choiceOption('--role <role>', 'what the token may do', TOKEN_ROLES).makeOptionMandatory(),
    )
    .option('--tenant <tenant-id>', 'the tenant it acts for (required unless --role admin)')
    .option('--description <text>', 'what the token is for (at most 200 characters)')
    .action(async (o: RemoteOptions & { role: string; tenant?: string; description?: string }) =>
      withClient(run, o, async (c) => {
        if (o.role === 'admin' && o.tenant !== undefined)
          throw new UsageError('--tenant: an admin token acts for every tenant; leave it out');
        if (o.role !== 'admin' && o.tenant === undefined)
          throw new UsageError(`--tenant is required for a ${o.role} token`);
        const res = await c.call<Obj>('TokenService', 'CreateToken', {
          tenant: o.tenant ?? '',
          role: o.role,
          description: o.description ?? '',
        });
        if (o.json === true) return printJson(run, res);
        table(run, HEADER, rows([res['info'] as Obj]));
        run.io.writeOut(`token (shown once; store it now): ${text(res['token'])}\n`);
      }),
    );

  remote(tokens.command('list'))
    .description('every token (ids and hints, never the tokens), oldest first')
    .option('--tenant <tenant-id>', "only this tenant's tokens")
    .action(async (o: RemoteOptions & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('TokenService', 'ListTokens', { tenant: o.tenant ?? '' });
        if (o.json === true) return printJson(run, res);
        table(run, HEADER, rows((res['tokens'] as Obj[] | undefined) ?? []));
      }),
    );

  remote(tokens.command('revoke'))
    .description('revoke a token: every node refuses it within 5 s')
    .argument('<token-id>', 'the id `tokens list` shows (tok_…)')
    .action(async (tokenId: string, o: RemoteOptions) =>
      withClient(run, o, async (c) => {
        await c.call<Obj>('TokenService', 'RevokeToken', { tokenId });
        if (o.json === true) return printJson(run, { revoked: tokenId });
        run.io.writeOut(`revoked ${tokenId}\n`);
      }),
    );
  program.addCommand(tokens);
}
