/**
 * How a node that knows no leader of a group finds it: it asks the group's replicas in turn.
 * The list starts with the replicas the meta group records, then the node a replica move in
 * flight is adding: in a move's joint phase that node is already a voter and may win the
 * group's leadership before the move is recorded as done. A replica that answers "not the
 * leader" naming the leader sends the walk there next, whether or not the list names it. Each
 * node is asked once, so hints that point at each other cannot loop.
 */

export interface ReplicaWalk<T> {
  /** Forwards the call to node `id`. */
  readonly ask: (id: string) => Promise<T>;
  /** Whether another node may still serve the call after this error. */
  readonly retryable: (err: unknown) => boolean;
  /** The leader an error names (a "not the leader" answer), if any. */
  readonly leaderHintOf: (err: unknown) => string | undefined;
}

export async function askReplicasInTurn<T>(
  candidates: readonly string[],
  walk: ReplicaWalk<T>,
  noneAnswered: unknown,
): Promise<T> {
  const queue = [...candidates];
  const asked = new Set<string>();
  let lastErr = noneAnswered;
  for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
    if (asked.has(id)) continue;
    asked.add(id);
    try {
      return await walk.ask(id);
    } catch (err) {
      if (!walk.retryable(err)) throw err;
      lastErr = err;
      const hint = walk.leaderHintOf(err);
      if (hint !== undefined && hint !== '' && !asked.has(hint)) queue.unshift(hint);
    }
  }
  throw lastErr;
}
