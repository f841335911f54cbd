/**
 * `tickctl cluster add-node | move-replica | rebalance | drain-node | undrain-node | remove-node`:
 * growing and shrinking the cluster and spreading its replicas. A move is recorded in the meta
 * group and carried out by the meta leader; these commands start it and then follow
 * ClusterStatus until it is done, printing each phase.
 */
import type { Command } from 'commander';
import * as grpc from '@grpc/grpc-js';
import { ApiCallError, type ApiClient } from '../../api/client.js';
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

/** Tries of one call that found the cluster momentarily without a leader (UNAVAILABLE). */
const TRANSIENT_TRIES = 20;

/**
 * Calls again while the cluster answers UNAVAILABLE or DEADLINE_EXCEEDED (a leader moving, as
 * moves and hand-overs make it do): every round and status read here is safe to repeat.
 */
async function patiently<T>(call: () => Promise<T>): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await call();
    } catch (err) {
      const transient =
        err instanceof ApiCallError &&
        (err.status === grpc.status.UNAVAILABLE || err.status === grpc.status.DEADLINE_EXCEEDED);
      if (!transient || i >= TRANSIENT_TRIES) throw err;
      await new Promise((resolve) => setTimeout(resolve, err.retryDelayMs ?? 500));
    }
  }
}

function describeMove(m: Obj): string {
  const from = text(m['fromNode']);
  return `group ${text(m['groupId'])}: ${from === '' ? '(add)' : from} → ${text(m['toNode'])}`;
}

/** Waits until no move is in flight, printing phase changes; returns the moves seen. */
async function followMoves(run: CliRun, c: ApiClient, quiet: boolean): Promise<number> {
  const seen = new Map<string, string>();
  const deadline = Date.now() + MOVE_WAIT_MS;
  for (;;) {
    const st = await patiently(() => c.call<Obj>('AdminService', 'ClusterStatus', {}));
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
        const round = (dryRun: boolean): Promise<Obj> =>
          c.call<Obj>('AdminService', 'Rebalance', { dryRun, maxConcurrentMoves });
        const r = await carryOut(run, c, o, round);
        if (r)
          run.io.writeOut(`balanced: ${r.moved} move(s), ${r.transferred} leader transfer(s)\n`);
      }),
    );

  registerShrinkCommands(cluster, run);
}

/** drain-node and remove-node: taking a node out of the cluster. */
function registerShrinkCommands(cluster: Command, run: CliRun): void {
  remote(cluster.command('drain-node'))
    .description(
      'move every replica and leadership off a node (for a deploy or retirement): marks it draining, prints the plan, then carries it out; the node receives nothing until it is removed or undrained',
    )
    .argument('<node>', 'node id')
    .option('--dry-run', 'print the plan only (the node is not marked draining)')
    .option('--max-concurrent-moves <n>', 'moves carried out at once', '1')
    .action(
      async (node: string, o: RemoteOptions & { dryRun?: boolean; maxConcurrentMoves: string }) =>
        withClient(run, o, async (c) => {
          const maxConcurrentMoves = wholeNumber('--max-concurrent-moves', o.maxConcurrentMoves, 1);
          const round = (dryRun: boolean): Promise<Obj> =>
            c.call<Obj>('AdminService', 'DrainNode', { nodeId: node, dryRun, maxConcurrentMoves });
          const r = await carryOut(run, c, o, round);
          if (!r) return;
          const st = await c.call<Obj>('AdminService', 'ClusterStatus', {});
          const held = (st['groups'] as Obj[]).filter(
            (g) => g['groupId'] !== 0 && (g['replicas'] as Obj[]).some((x) => x['nodeId'] === node),
          );
          if (held.length > 0)
            throw new UsageError(
              `${node} still holds group(s) ${held.map((g) => text(g['groupId'])).join(',')}: no other active node is free for them; add a node and drain again`,
            );
          run.io.writeOut(
            `drained ${node}: ${r.moved} move(s), ${r.transferred} leader transfer(s); remove it with \`tickctl cluster remove-node ${node}\`\n`,
          );
        }),
    );

  remote(cluster.command('undrain-node'))
    .description(
      'make a draining node active again (its deploy is over): it can receive replicas again; run `cluster rebalance` to give it some',
    )
    .argument('<node>', 'node id')
    .action(async (node: string, o: RemoteOptions) =>
      withClient(run, o, async (c) => {
        const r = await patiently(() =>
          c.call<Obj>('AdminService', 'UndrainNode', { nodeId: node }),
        );
        if (o.json === true) return printJson(run, r);
        run.io.writeOut(
          r['previousState'] === 'draining'
            ? `${node} is active again; \`tickctl cluster rebalance\` gives it replicas\n`
            : `${node} was already active\n`,
        );
      }),
    );

  remote(cluster.command('remove-node'))
    .description(
      'remove a node from the cluster; refused while it holds replicas (drain it first) unless --force is given for a node that is gone for good, whose groups then get new replicas from the survivors',
    )
    .argument('<node>', 'node id')
    .option(
      '--force',
      'the node is gone for good (it must not answer): re-replicate its groups onto other nodes, then remove it',
    )
    .option('--max-concurrent-moves <n>', 'moves carried out at once (with --force)', '1')
    .action(
      async (node: string, o: RemoteOptions & { force?: boolean; maxConcurrentMoves: string }) =>
        withClient(run, o, async (c) => {
          const maxConcurrentMoves = wholeNumber('--max-concurrent-moves', o.maxConcurrentMoves, 1);
          let moved = 0;
          for (let round = 0; round < REBALANCE_ROUNDS_MAX; round++) {
            const res = await patiently(() =>
              c.call<Obj>('AdminService', 'RemoveNode', {
                nodeId: node,
                force: o.force === true,
                maxConcurrentMoves,
              }),
            );
            if (res['removed'] === true) {
              if (o.json === true) return printJson(run, res);
              run.io.writeOut(
                o.force === true
                  ? `removed ${node}: ${moved} replica(s) re-created on other nodes\n`
                  : `removed ${node}\n`,
              );
              return;
            }
            if (round === 0 && o.json !== true)
              run.io.writeOut(
                `${node} held group(s) ${(res['holding'] as unknown[]).map(text).join(',')}: re-replicating from the survivors\n`,
              );
            for (const m of res['started'] as Obj[]) run.io.writeOut(`move ${describeMove(m)}\n`);
            moved += await followMoves(run, c, o.json === true);
          }
          throw new UsageError(`${node} not removed after ${REBALANCE_ROUNDS_MAX} rounds`);
        }),
    );
}

/**
 * Prints a round's plan, then calls rounds until nothing is left to move or hand over,
 * following each wave of moves; undefined for a dry run.
 */
async function carryOut(
  run: CliRun,
  c: ApiClient,
  o: RemoteOptions & { dryRun?: boolean },
  round: (dryRun: boolean) => Promise<Obj>,
): Promise<{ moved: number; transferred: number } | undefined> {
  const first = await round(true);
  if (o.json === true && o.dryRun === true) {
    printJson(run, first);
    return undefined;
  }
  printPlan(run, first);
  if (o.dryRun === true) return undefined;
  let moved = 0;
  let transferred = 0;
  let transferRounds = 0;
  for (let i = 0; i < REBALANCE_ROUNDS_MAX; i++) {
    const res = await patiently(() => round(false));
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
    return { moved, transferred };
  }
  throw new UsageError(`not done after ${REBALANCE_ROUNDS_MAX} rounds`);
}
