/**
 * `tickctl cluster split --group G`: splits a data group's hash range in two. The split is
 * recorded in the meta group and carried out by the meta leader (the group commits one split
 * entry; every replica cuts the new group from its own state there); the command starts it and
 * follows ClusterStatus until the new group is listed.
 */
import type { Command } from 'commander';
import * as grpc from '@grpc/grpc-js';
import { ApiCallError, type ApiClient } from '../../api/client.js';
import type { CliRun } from '../io.js';
import {
  printJson,
  remote,
  text,
  UsageError,
  wholeNumber,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

/** A split may take this long before the command gives up waiting (the split goes on). */
const SPLIT_WAIT_MS = 120_000;

/** ClusterStatus, asked again while the cluster is momentarily without a leader. */
async function status(c: ApiClient): Promise<Obj> {
  for (let i = 1; ; i++) {
    try {
      return await c.call<Obj>('AdminService', 'ClusterStatus', {});
    } catch (err) {
      const transient =
        err instanceof ApiCallError &&
        (err.status === grpc.status.UNAVAILABLE || err.status === grpc.status.DEADLINE_EXCEEDED);
      if (!transient || i >= 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, err.retryDelayMs ?? 500));
    }
  }
}

/** Waits until ClusterStatus lists `childId` and no split of `groupId` is in flight. */
async function followSplit(c: ApiClient, groupId: number, childId: number): Promise<Obj> {
  const deadline = Date.now() + SPLIT_WAIT_MS;
  for (;;) {
    const st = await status(c);
    const inFlight = ((st['splits'] as Obj[] | undefined) ?? []).some(
      (s) => s['groupId'] === groupId,
    );
    const child = (st['groups'] as Obj[]).find((g) => g['groupId'] === childId);
    if (!inFlight && child !== undefined) return st;
    if (Date.now() > deadline)
      throw new UsageError(
        `group ${groupId}'s split still in flight after ${SPLIT_WAIT_MS} ms; see cluster status`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function rangeOf(g: Obj | undefined): string {
  return g === undefined ? '?' : `[${text(g['rangeStart'])}, ${text(g['rangeEnd'])})`;
}

export function registerSplitCommand(cluster: Command, run: CliRun): void {
  remote(cluster.command('split'))
    .description(
      "split a data group's hash range in two: the upper half goes to a new group on the same replicas; waits until it is done",
    )
    .requiredOption('--group <id>', 'data group id')
    .action(async (o: RemoteOptions & { group: string }) =>
      withClient(run, o, async (c) => {
        const groupId = wholeNumber('--group', o.group, 1);
        const began = await c.call<Obj>('AdminService', 'SplitGroup', { groupId });
        const childId = Number(began['childGroupId']);
        if (o.json !== true)
          run.io.writeOut(
            `splitting group ${groupId} at ${text(began['mid'])}: [${text(began['mid'])}, ${text(began['end'])}) goes to group ${childId}\n`,
          );
        const st = await followSplit(c, groupId, childId);
        const groups = st['groups'] as Obj[];
        const parent = groups.find((g) => g['groupId'] === groupId);
        const child = groups.find((g) => g['groupId'] === childId);
        if (o.json === true) return printJson(run, { split: began, parent, child });
        run.io.writeOut(
          `split done: group ${groupId} ${rangeOf(parent)} epoch ${text(parent?.['epoch'])}, group ${childId} ${rangeOf(child)} epoch ${text(child?.['epoch'])}, leader ${text(child?.['leader']) || '(electing)'}\n`,
        );
      }),
    );
}
