/**
 * CPU time of benchmark processes read from outside, from the kernel's own counts in /proc, so
 * that measuring a node costs it nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time of process `pid`, all its threads, in ms: the kernel's own count
 * (/proc/<pid>/task/<tid>/schedstat, ns on a CPU), read from outside, so that measuring it costs
 * the node nothing. NaN where /proc cannot be read (not Linux).
 */
export function processCpuMs(pid: number): number {
  let ns = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`))
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return Number.NaN;
  }
  return ns / 1e6;
}

/**
 * The process's CPU sampled every 100 ms from now until `stop()`; `at(t)` interpolates it at
 * wall time t, so that the drain's own CPU (slot to last fire) is told apart from what follows.
 */
export function traceCpu(pid: number): { stop(): void; at(t: number): number } {
  const samples: { t: number; cpuMs: number }[] = [];
  const sample = (): void => {
    samples.push({ t: Date.now(), cpuMs: processCpuMs(pid) });
  };
  sample();
  const timer = setInterval(sample, 100);
  return {
    stop() {
      clearInterval(timer);
      sample();
    },
    at(t) {
      const after = samples.findIndex((s) => s.t >= t);
      if (after <= 0)
        return (samples[after < 0 ? samples.length - 1 : 0] as { cpuMs: number }).cpuMs;
      const a = samples[after - 1] as { t: number; cpuMs: number };
      const b = samples[after] as { t: number; cpuMs: number };
      return b.t === a.t ? b.cpuMs : a.cpuMs + ((b.cpuMs - a.cpuMs) * (t - a.t)) / (b.t - a.t);
    },
  };
}
