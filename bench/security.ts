/**
 * What authentication and TLS cost, measured in one run on one machine: bulk registration and
 * a :00 spike against three otherwise identical clusters, with nothing (--insecure-no-auth,
 * plaintext), with bearer tokens, and with tokens plus TLS on the client API and mutual TLS
 * between nodes. Figures only; the overhead is each mode's figure against the first's.
 */
import type { ClusterSecurity } from '../test/helpers/cluster.js';
import { fmt } from './figures.js';
import { runRegistration } from './registration.js';
import { runSpike } from './spike.js';

export const SECURITY_MODES: readonly ClusterSecurity[] = ['off', 'auth', 'auth+tls'];

export interface SecurityOptions {
  readonly jobs: number;
  readonly spikeJobs: number;
  readonly groups: number;
  readonly log: (line: string) => void;
}

export interface SecurityFigures {
  readonly mode: ClusterSecurity;
  readonly jobsPerSec: number;
  readonly cpuUsPerJob: number;
  readonly spikeDrainRatio: number;
  readonly spikeP99Ratio: number;
  readonly spikeDrainMs: number;
  /** Jobs registered, fires delivered (each must be all of them). */
  readonly created: number;
  readonly received: number;
}

export async function runSecurity(opts: SecurityOptions): Promise<SecurityFigures[]> {
  const out: SecurityFigures[] = [];
  const quiet = (): void => undefined;
  for (const mode of SECURITY_MODES) {
    opts.log(
      `  ${mode}: registering ${fmt(opts.jobs)} jobs, then a spike of ${fmt(opts.spikeJobs)}`,
    );
    const r = await runRegistration({
      jobs: opts.jobs,
      groups: opts.groups,
      batch: 1000,
      inflight: 8,
      warmupJobs: Math.min(20_000, opts.jobs),
      settleMs: 0,
      security: mode,
      log: quiet,
    });
    const s = await runSpike({
      jobs: opts.spikeJobs,
      groups: opts.groups,
      warmup: Math.min(5000, opts.spikeJobs),
      security: mode,
      log: quiet,
    });
    const f: SecurityFigures = {
      mode,
      jobsPerSec: r.jobsPerSec,
      cpuUsPerJob: r.clusterCpuUsPerJob,
      spikeDrainRatio: s.drainRatio,
      spikeP99Ratio: s.p99Ratio,
      spikeDrainMs: s.tickraft.drainMs,
      created: r.created,
      received: s.tickraft.received,
    };
    opts.log(
      `    ${fmt(f.jobsPerSec)} jobs/s, ${fmt(f.cpuUsPerJob)} µs cluster CPU per job; spike drained in ` +
        `${fmt(f.spikeDrainMs)} ms = ${f.spikeDrainRatio.toFixed(2)}× the bare client, p99 ${f.spikeP99Ratio.toFixed(2)}×`,
    );
    out.push(f);
  }
  return out;
}

/** `+3.1 %` of `value` against `base` (positive: worse when `higherIsBetter` is false). */
export function overhead(value: number, base: number, higherIsBetter: boolean): string {
  const pct = higherIsBetter ? ((base - value) / base) * 100 : ((value - base) / base) * 100;
  return `${pct >= 0 ? '+' : ''}${pct.toFixed(1)} %`;
}
