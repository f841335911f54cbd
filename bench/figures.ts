/** What every benchmark prints: percentiles, rounded numbers, and the machine it ran on. */
import os from 'node:os';

/** The p-th percentile (0-100) of an ascending list; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A whole number with thousands separators. */
export const fmt = (n: number): string =>
  Number.isFinite(n) ? Math.round(n).toLocaleString('en') : String(n);

export interface MachineContext {
  readonly cpuModel: string;
  readonly cpus: number;
  readonly ramGiB: number;
  readonly node: string;
  /** The 1, 5 and 15 minute load averages. */
  readonly load: readonly number[];
}

export function machineContext(): MachineContext {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown cpu',
    cpus: cpus.length,
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    load: os.loadavg().map((l) => Math.round(l * 100) / 100),
  };
}

export function describeMachine(m: MachineContext): string {
  return `${m.cpus} × ${m.cpuModel}, ${m.ramGiB} GiB, node ${m.node}, load ${m.load.join(' ')}`;
}

/** One row of `npm run bench`'s table. */
export interface Row {
  readonly figure: string;
  readonly measured: string;
  readonly target: string;
  /** 'yes', 'NO', or '' for a figure without a target. */
  readonly met: string;
}

export const met = (ok: boolean): string => (ok ? 'yes' : 'NO');
