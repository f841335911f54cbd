/**
 * `tickctl cluster status` and `tickctl leader transfer`: what an operator looks at first, and
 * the hand-over they do before taking a node down by hand.
 */
import { Command } from 'commander';
import type { CliRun } from '../io.js';
import { registerMembershipCommands } from './membership.js';
import { registerSplitCommand } from './split.js';
import {
  EXIT_CODES_HELP,
  printJson,
  text,
  remote,
  table,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

export function registerClusterCommands(program: Command, run: CliRun): void {
  const cluster = new Command('cluster').description(
    'cluster-wide views, membership and rebalancing',
  );
  cluster.addHelpText('after', EXIT_CODES_HELP);
  remote(cluster.command('status'))
    .description(
      'nodes, groups (leader, preferred leader, term, jobs, fires per second), and each replica’s commit and apply indexes',
    )
    .action(async (o: RemoteOptions) =>
      withClient(run, o, async (c) => {
        const st = await c.call<Obj>('AdminService', 'ClusterStatus', {});
        if (o.json === true) return printJson(run, st);
        table(
          run,
          ['NODE', 'API', 'PEER', 'STATE', 'REACHABLE'],
          (st['nodes'] as Obj[]).map((n) => [
            text(n['id']),
            text(n['apiAddress'] || '-'),
            text(n['peerAddress']),
            text(n['state']),
            n['reachable'] === true ? 'yes' : 'NO',
          ]),
        );
        run.io.writeOut('\n');
        groupTable(run, st['groups'] as Obj[]);
        const moves = (st['moves'] as Obj[] | undefined) ?? [];
        if (moves.length > 0) {
          run.io.writeOut('\n');
          table(
            run,
            ['MOVING GROUP', 'FROM', 'TO', 'PHASE'],
            moves.map((m) => [
              text(m['groupId']),
              text(m['fromNode']) || '(add)',
              text(m['toNode']),
              text(m['phase']),
            ]),
          );
        }
        const splits = (st['splits'] as Obj[] | undefined) ?? [];
        if (splits.length > 0) {
          run.io.writeOut('\n');
          table(
            run,
            ['SPLITTING GROUP', 'AT', 'UPPER HALF TO GROUP'],
            splits.map((sp) => [text(sp['groupId']), text(sp['mid']), text(sp['childGroupId'])]),
          );
        }
      }),
    );
  registerMembershipCommands(cluster, run);
  registerSplitCommand(cluster, run);
  program.addCommand(cluster);

  const leader = new Command('leader').description('group leadership');
  leader.addHelpText('after', EXIT_CODES_HELP);
  remote(leader.command('transfer'))
    .description(
      "hand a group's leadership to another voter (data groups drain deliveries first, and keep the new leader as their preferred one)",
    )
    .requiredOption('--group <id>', 'group id (0 is the meta group)')
    .requiredOption('--to <node>', 'node id of a voter of the group')
    .action(async (o: RemoteOptions & { group: string; to: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('AdminService', 'TransferLeader', {
          groupId: wholeNumber('--group', o.group),
          toNode: o.to,
        });
        if (o.json === true) return printJson(run, res);
        run.io.writeOut(
          `group ${o.group} is led by ${text(res['leader'])} (term ${text(res['term'])})\n`,
        );
      }),
    );
  program.addCommand(leader);
}

/** Fires per second as the table shows it: two decimals below 10, whole numbers above. */
function fireRate(v: unknown): string {
  const n = typeof v === 'number' ? v : Number(v ?? 0);
  return n < 10 ? n.toFixed(2) : String(Math.round(n));
}

/**
 * One row per group: leader, where its leadership belongs (set by `leader transfer` or the
 * rebalancer; `-`: the bootstrap plan's first replica), term, epoch, the leader's jobs and fire
 * rate, every replica.
 */
function groupTable(run: CliRun, groups: Obj[]): void {
  table(
    run,
    [
      'GROUP',
      'LEADER',
      'PREFERRED',
      'TERM',
      'EPOCH',
      'JOBS',
      'FIRES/S',
      'REPLICAS (role commit/applied)',
    ],
    groups.map((g) => [
      text(g['groupId']),
      text(g['leader'] || 'NONE'),
      text(g['preferredLeader']) || '-',
      text(g['term']),
      text(g['epoch']),
      g['groupId'] === 0 ? '-' : text(g['jobs']),
      g['groupId'] === 0 ? '-' : fireRate(g['fireRatePerSec']),
      (g['replicas'] as Obj[])
        .map((r) =>
          r['role']
            ? `${text(r['nodeId'])}(${text(r['role'])} ${text(r['commitIndex'])}/${text(r['appliedIndex'])})`
            : `${text(r['nodeId'])}(unreachable)`,
        )
        .join(' '),
    ]),
  );
}
