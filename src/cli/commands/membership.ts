/**
 * `tickctl cluster add-node | move-replica | rebalance`: growing the cluster and spreading its
 * replicas. A move is recorded in the meta group and carried out by the meta leader; these
 * commands start it and then follow ClusterStatus until it is done, printing each phase.
 */
import type { Command } from 'commander';
import type { ApiClient } from '../../api/client.js';
import type { CliRun } from '../io.js';
import {
  printJson,
  remote,
  table,
  text,
  UsageError,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

/** Rounds of plan → moves → wait; each round makes the layout strictly better. */
const REBALANCE_ROUNDS_MAX = 200;
/** Rounds of leader transfers once no move is left. */
const TRANSFER_ROUNDS_MAX = 3;
/** One move may take this long before the command gives up waiting (the move goes on). */
const MOVE_WAIT_MS = 180_000;

function describeMove(m: Obj): string {
  const from = text(m['fromNode']);
  return `group ${text(m['groupId'])}: ${from === '' ? '(add)' : from} → ${text(m['toNode'])}`;
}

/** Waits until no move is in flight, printing phase changes; returns the moves seen. */
async function followMoves(run: CliRun, c: ApiClient, quiet: boolean): Promise<number> {
  const seen = new Map<string, string>();
  const deadline = Date.now() + MOVE_WAIT_MS;
  for (;;) {
    const st = await c.call<Obj>('AdminService', 'ClusterStatus', {});
    const moves = (st['moves'] as Obj[] | undefined) ?? [];
    for (const m of moves) {
      const key = describeMove(m);
      if (seen.get(key) === m['phase']) continue;
      seen.set(key, String(m['phase']));
      if (!quiet) run.io.writeOut(`  ${key}: ${text(m['phase'])}\n`);
    }
    if (moves.length === 0) return seen.size;
    if (Date.now() > deadline)
      throw new UsageError(`moves still in flight after ${MOVE_WAIT_MS} ms; see cluster status`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

function printPlan(run: CliRun, res: Obj): void {
  const moves = res['moves'] as Obj[];
  const transfers = res['transfers'] as Obj[];
  if (moves.length === 0 && transfers.length === 0) {
    run.io.writeOut('balanced: nothing to move\n');
    return;
  }
  if (moves.length > 0)
    table(
      run,
      ['WAVE', 'GROUP', 'FROM', 'TO'],
      moves.map((m) => [
        text(m['wave']),
        text(m['groupId']),
        text(m['fromNode']) || '(add)',
        text(m['toNode']),
      ]),
    );
  if (transfers.length > 0) {
    if (moves.length > 0) run.io.writeOut('\n');
    table(
      run,
      ['LEADER OF GROUP', 'FROM', 'TO'],
      transfers.map((t) => [text(t['groupId']), text(t['fromNode']), text(t['toNode'])]),
    );
  }
  const now = new Map((res['loadNow'] as Obj[]).map((l) => [l['nodeId'], l]));
  run.io.writeOut('\n');
  table(
    run,
    ['NODE', 'REPLICAS NOW', 'AFTER', 'LEADERS NOW', 'AFTER'],
    (res['loadAfter'] as Obj[]).map((l) => [
      text(l['nodeId']),
      text(now.get(l['nodeId'])?.['replicas']),
      text(l['replicas']),
      text(now.get(l['nodeId'])?.['leaders']),
      text(l['leaders']),
    ]),
  );
}

export function registerMembershipCommands(cluster: Command, run: CliRun): void {
  remote(cluster.command('add-node'))
    .description(
      'register a node (then start it with `tickraft serve --join`); refused if the id or an address is in use',
    )
    .requiredOption('--id <node>', 'the new node id')
    .requiredOption('--peer-address <host:port>', "the node's peer (Raft) address")
    .option('--api-address <host:port>', "the node's client API address", '')
    .action(async (o: RemoteOptions & { id: string; peerAddress: string; apiAddress: string }) =>
      withClient(run, o, async (c) => {
        const res = await c.call<Obj>('AdminService', 'AddNode', {
          nodeId: o.id,
          peerAddress: o.peerAddress,
          apiAddress: o.apiAddress,
        });
        if (o.json === true) return printJson(run, res);
        run.io.writeOut(`node ${o.id} added (${(res['nodes'] as Obj[]).length} members)\n`);
      }),
    );

  remote(cluster.command('move-replica'))
    .description('move one replica of a group to another node, and wait until it is done')
    .requiredOption('--group <id>', 'data group id')
    .option('--from <node>', 'the node whose replica leaves (omit to add a replica)', '')
    .requiredOption('--to <node>', 'the node that receives the replica')
    .action(async (o: RemoteOptions & { group: string; from: string; to: string }) =>
      withClient(run, o, async (c) => {
        const groupId = wholeNumber('--group', o.group, 1);
        await c.call('AdminService', 'MoveReplica', { groupId, fromNode: o.from, toNode: o.to });
        run.io.writeOut(`moving group ${groupId}: ${o.from || '(add)'} → ${o.to}\n`);
        await followMoves(run, c, o.json === true);
        run.io.writeOut('done\n');
      }),
    );

  remote(cluster.command('rebalance'))
    .description(
      'spread replicas and leaders evenly over the active nodes (drains draining nodes): prints the plan, then carries it out',
    )
    .option('--dry-run', 'print the plan only')
    .option('--max-concurrent-moves <n>', 'moves carried out at once', '1')
    .action(async (o: RemoteOptions & { dryRun?: boolean; maxConcurrentMoves: string }) =>
      withClient(run, o, async (c) => {
        const maxConcurrentMoves = wholeNumber('--max-concurrent-moves', o.maxConcurrentMoves, 1);
        const first = await c.call<Obj>('AdminService', 'Rebalance', {
          dryRun: true,
          maxConcurrentMoves,
        });
        if (o.json === true && o.dryRun === true) return printJson(run, first);
        printPlan(run, first);
        if (o.dryRun === true) return;
        let moved = 0;
        let transferred = 0;
        let transferRounds = 0;
        for (let round = 0; round < REBALANCE_ROUNDS_MAX; round++) {
          const res = await c.call<Obj>('AdminService', 'Rebalance', {
            dryRun: false,
            maxConcurrentMoves,
          });
          const started = res['started'] as Obj[];
          const done = res['transferred'] as Obj[];
          const inFlight = res['inFlight'] as Obj[];
          for (const m of started) run.io.writeOut(`move ${describeMove(m)}\n`);
          for (const t of done) run.io.writeOut(`leader of ${describeMove(t)}\n`);
          transferred += done.length;
          if (started.length > 0 || inFlight.length > 0) {
            moved += await followMoves(run, c, false);
            continue;
          }
          // Leaders settle in a few rounds; a transfer that did not hold is planned again.
          if (done.length > 0 && ++transferRounds < TRANSFER_ROUNDS_MAX) continue;
          run.io.writeOut(`balanced: ${moved} move(s), ${transferred} leader transfer(s)\n`);
          return;
        }
        throw new UsageError(`not balanced after ${REBALANCE_ROUNDS_MAX} rounds`);
      }),
    );
}
