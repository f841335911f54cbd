/**
 * Process faults on real `tickraft serve` processes: kill -9 then restart on the same data dir,
 * and SIGSTOP / SIGCONT pauses (the process freezes with its sockets open, as in a long GC pause
 * or a VM stall). Both act on the node's own PID (libfaketime is preloaded, not a wrapper).
 */
import type { ProcNode } from '../../test/helpers/cluster.js';
import { NodeClocks } from './clock.js';

/** SIGKILL; cleans libfaketime's per-PID objects. Returns once the process is gone. */
export async function killNode(node: ProcNode): Promise<number | undefined> {
  const pid = node.proc?.pid;
  // A paused process dies on SIGKILL too; forget the pause so the restart is not confused.
  node.paused = false;
  await node.kill9();
  if (pid !== undefined) NodeClocks.cleanupKilled(pid);
  return pid;
}

/** Starts a killed node again on the same data dir (its env and routes are kept). */
export function restartNode(node: ProcNode): void {
  if (!node.running) node.start();
}

export function pauseNode(node: ProcNode): void {
  if (node.running && !node.paused) node.pause();
}

export function resumeNode(node: ProcNode): void {
  if (node.paused) node.resume();
}
