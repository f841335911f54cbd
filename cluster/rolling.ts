/**
 * A rolling restart: every node in turn hands its leaderships over (SIGTERM drains in-flight
 * deliveries, commits their results and transfers each leadership before exiting), starts
 * again on the same data, and is caught up before the next node goes. At no time is more than
 * one node down, so every group keeps a quorum and its slots keep firing.
 *
 * "Caught up" is read from the public AdminService.ClusterStatus, asked of a node that stayed
 * up: every group has a leader, and in every group the restarted node replicates, its applied
 * index has reached the commit index that group's leader reported once the node was back.
 */
import { ApiClient } from '../src/api/client.js';

export interface RestartableNode {
  readonly id: string;
  /** The node's client API address (host:port). */
  readonly endpoint: string;
  /** Sends SIGTERM and resolves once the process has exited. */
  stop(): Promise<void>;
  /** Starts the process again with the same flags and data directory. */
  start(): void;
}

export interface RollingRestartOptions {
  /** Longest wait for a node to come back and catch up. @default 60000 */
  readonly catchUpTimeoutMs?: number;
  /** Between status polls. @default 200 */
  readonly pollMs?: number;
  /** The token status calls carry (the cluster's admin token); none without authentication. */
  readonly token?: string | undefined;
}

export interface NodeRestartReport {
  readonly id: string;
  /** From SIGTERM to the process's exit (the drained hand-over). */
  readonly stopMs: number;
  /** From the start to caught up. */
  readonly catchUpMs: number;
  /** Leaderships the node held before it stopped. */
  readonly leadershipsMoved: number;
}

export class RollingRestartError extends Error {
  override readonly name = 'RollingRestartError';
  constructor(
    readonly code: 'ROLLING_RESTART_NOT_CAUGHT_UP' | 'ROLLING_RESTART_NO_QUORUM',
    message: string,
  ) {
    super(message);
  }
}

interface ReplicaStatus {
  nodeId: string;
  role: string;
  commitIndex: number | string;
  appliedIndex: number | string;
}

interface GroupInfo {
  groupId: number;
  leader: string;
  replicas: ReplicaStatus[];
}

interface ClusterStatus {
  groups: GroupInfo[];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function rollingRestart(
  nodes: readonly RestartableNode[],
  log: (line: string) => void,
  options: RollingRestartOptions = {},
): Promise<NodeRestartReport[]> {
  const timeoutMs = options.catchUpTimeoutMs ?? 60_000;
  const pollMs = options.pollMs ?? 200;
  const reports: NodeRestartReport[] = [];
  for (const node of nodes) {
    const others = nodes.filter((n) => n !== node);
    const witness = new ApiClient(others[0]!.endpoint, 5000, {}, { token: options.token });
    try {
      const before = await waitForStatus(
        witness,
        (st) => st.groups.every((g) => g.leader !== ''),
        timeoutMs,
        pollMs,
      ).catch(() => {
        throw new RollingRestartError(
          'ROLLING_RESTART_NO_QUORUM',
          `some group has no leader before restarting ${node.id}; not restarting anything`,
        );
      });
      const held = before.groups.filter((g) => g.leader === node.id).length;
      log(`${node.id}: draining ${held} leadership(s) and stopping`);
      const stopStart = performance.now();
      await node.stop();
      const stopMs = performance.now() - stopStart;
      const startAt = performance.now();
      node.start();
      log(`${node.id}: stopped in ${Math.round(stopMs)} ms, started again; catching up`);
      // The commit index each group had once the node is back: the node must reach it.
      const back = await waitForStatus(
        witness,
        (st) => st.groups.every((g) => g.leader !== '' && replicaOf(g, node.id)?.role !== ''),
        timeoutMs,
        pollMs,
      ).catch(() => {
        throw new RollingRestartError(
          'ROLLING_RESTART_NOT_CAUGHT_UP',
          `${node.id} did not rejoin every group within ${timeoutMs} ms`,
        );
      });
      const targets = new Map(
        back.groups
          .filter((g) => replicaOf(g, node.id) !== undefined)
          .map((g) => [g.groupId, Number(replicaOf(g, g.leader)?.commitIndex ?? 0)]),
      );
      await waitForStatus(
        witness,
        (st) =>
          st.groups.every((g) => {
            const target = targets.get(g.groupId);
            const mine = replicaOf(g, node.id);
            return (
              g.leader !== '' &&
              (target === undefined || (mine !== undefined && Number(mine.appliedIndex) >= target))
            );
          }),
        timeoutMs,
        pollMs,
      ).catch(() => {
        throw new RollingRestartError(
          'ROLLING_RESTART_NOT_CAUGHT_UP',
          `${node.id} did not catch up within ${timeoutMs} ms`,
        );
      });
      const catchUpMs = performance.now() - startAt;
      log(`${node.id}: caught up in ${Math.round(catchUpMs)} ms`);
      reports.push({ id: node.id, stopMs, catchUpMs, leadershipsMoved: held });
    } finally {
      witness.close();
    }
  }
  return reports;
}

function replicaOf(g: GroupInfo, nodeId: string): ReplicaStatus | undefined {
  return g.replicas.find((r) => r.nodeId === nodeId);
}

async function waitForStatus(
  client: ApiClient,
  ready: (st: ClusterStatus) => boolean,
  timeoutMs: number,
  pollMs: number,
): Promise<ClusterStatus> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const st = await client.call<ClusterStatus>('AdminService', 'ClusterStatus', {});
      if (ready(st)) return st;
      last = new Error('not ready');
    } catch (err) {
      last = err;
    }
    if (performance.now() > deadline) throw last;
    await sleep(pollMs);
  }
}
