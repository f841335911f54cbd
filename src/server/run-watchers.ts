/**
 * Who follows which job's runs on this node (RunService.WatchRuns): each group's dispatcher
 * tells it of every run it touched (GroupDispatcher.onRunTouched), and it passes the fire id on
 * to the listeners of that run's job. With nobody watching a group, a touch costs one map lookup.
 */
export type RunListener = (fireId: string) => void;

export class RunWatchers {
  private readonly byGroup = new Map<number, Map<string, Set<RunListener>>>();

  /** A dispatcher touched `fireId` (`<job key>:<slot ms>`) of `groupId`. */
  touched(groupId: number, fireId: string): void {
    const jobs = this.byGroup.get(groupId);
    if (jobs === undefined) return;
    const listeners = jobs.get(fireId.slice(0, fireId.lastIndexOf(':')));
    if (listeners === undefined) return;
    for (const l of [...listeners]) l(fireId);
  }

  /** Calls `listener` with every touched run of job `jobKey` in `groupId`; returns the stop. */
  watch(groupId: number, jobKey: string, listener: RunListener): () => void {
    let jobs = this.byGroup.get(groupId);
    if (jobs === undefined) this.byGroup.set(groupId, (jobs = new Map<string, Set<RunListener>>()));
    let set = jobs.get(jobKey);
    if (set === undefined) jobs.set(jobKey, (set = new Set<RunListener>()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size > 0) return;
      jobs.delete(jobKey);
      if (jobs.size === 0) this.byGroup.delete(groupId);
    };
  }

  /** Listeners in all, for tests and debug status. */
  get size(): number {
    let n = 0;
    for (const jobs of this.byGroup.values()) for (const set of jobs.values()) n += set.size;
    return n;
  }
}
