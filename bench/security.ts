/**
 * What authentication and TLS cost, measured in one run on one machine: bulk registration and
 * a :00 spike against three otherwise identical clusters, with nothing (--insecure-no-auth,
 * plaintext), with bearer tokens, and with tokens plus TLS on the client API and mutual TLS
 * between nodes. Figures only; the overhead is each mode's figure against the first's.
 */
import { Authenticator } from '../src/auth/authenticator.js';
import { hashToken, newTokenSecret, tokenHint } from '../src/auth/token-secret.js';
import type { TokenRecord } from '../src/auth/token-state.js';
import { SystemClock } from '../src/base/clock.js';
import type { ClusterSecurity } from '../test/helpers/cluster.js';
import { fmt } from './figures.js';
import { runRegistration } from './registration.js';
import { runSpike } from './spike.js';

export const SECURITY_MODES: readonly ClusterSecurity[] = ['off', 'auth', 'auth+tls'];

export interface SecurityOptions {
  readonly jobs: number;
  readonly spikeJobs: number;
  readonly groups: number;
  /**
   * Rounds of every mode, interleaved (off, auth, auth+tls, off, …) so that the machine's drift
   * falls on every mode alike; the figures are each mode's medians.
   */
  readonly trials: number;
  readonly log: (line: string) => void;
}

export interface SecurityFigures {
  readonly mode: ClusterSecurity;
  readonly jobsPerSec: number;
  readonly cpuUsPerJob: number;
  /** One CreateJobs call (1,000 jobs), median. */
  readonly batchP50Ms: number;
  readonly spikeDrainRatio: number;
  readonly spikeP99Ratio: number;
  readonly spikeDrainMs: number;
  /** Jobs registered, fires delivered (each must be all of them). */
  readonly created: number;
  readonly received: number;
}

export async function runSecurity(
  opts: SecurityOptions,
): Promise<{ modes: SecurityFigures[]; check: { bootstrapUs: number; storedUs: number } }> {
  const check = await tokenCheckCost();
  opts.log(
    `  the token check in-process: ${check.bootstrapUs.toFixed(2)} µs (bootstrap token), ${check.storedUs.toFixed(2)} µs (a stored token) per call`,
  );
  const trials = new Map<ClusterSecurity, SecurityFigures[]>(SECURITY_MODES.map((m) => [m, []]));
  for (let round = 0; round < opts.trials; round++)
    for (const mode of SECURITY_MODES) trials.get(mode)!.push(await runMode(mode, opts));
  return { modes: SECURITY_MODES.map((mode) => medianOf(mode, trials.get(mode)!)), check };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1
    ? s[(s.length - 1) / 2]!
    : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** Each figure's median over the trials; created and received: the fewest of any trial. */
function medianOf(mode: ClusterSecurity, runs: readonly SecurityFigures[]): SecurityFigures {
  const m = (f: (x: SecurityFigures) => number): number => median(runs.map(f));
  return {
    mode,
    jobsPerSec: m((x) => x.jobsPerSec),
    cpuUsPerJob: m((x) => x.cpuUsPerJob),
    batchP50Ms: m((x) => x.batchP50Ms),
    spikeDrainRatio: m((x) => x.spikeDrainRatio),
    spikeP99Ratio: m((x) => x.spikeP99Ratio),
    spikeDrainMs: m((x) => x.spikeDrainMs),
    created: Math.min(...runs.map((x) => x.created)),
    received: Math.min(...runs.map((x) => x.received)),
  };
}

async function runMode(mode: ClusterSecurity, opts: SecurityOptions): Promise<SecurityFigures> {
  const quiet = (): void => undefined;
  opts.log(`  ${mode}: registering ${fmt(opts.jobs)} jobs, then a spike of ${fmt(opts.spikeJobs)}`);
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
    batchP50Ms: r.batchP50Ms,
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
  return f;
}

/**
 * The token check itself, in this process: µs per `authenticate` of the bootstrap token and of a
 * stored tenant token (on a fresh meta state), over `calls` calls. This is what authentication
 * adds to every RPC; the cluster figures above are too noisy on a shared machine to show it.
 */
export async function tokenCheckCost(
  calls = 200_000,
): Promise<{ bootstrapUs: number; storedUs: number }> {
  const admin = newTokenSecret();
  const stored = newTokenSecret();
  const record: TokenRecord = {
    id: 'tok_0000000000000001',
    hash: hashToken(stored),
    hint: tokenHint(stored),
    tenant: 'bench',
    role: 'writer',
    description: '',
    createdAtMs: 0,
    createdBy: 'bench',
  };
  const auth = new Authenticator({
    adminTokenHash: hashToken(admin),
    tokensByHash: new Map([[record.hash, record]]),
    tokensById: new Map([[record.id, record]]),
    confirmMeta: () => Promise.resolve(),
    clock: SystemClock,
  });
  const time = async (header: string): Promise<number> => {
    for (let i = 0; i < 1000; i++) await auth.authenticate([header]);
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) await auth.authenticate([header]);
    return ((performance.now() - t0) * 1000) / calls;
  };
  return { bootstrapUs: await time(`Bearer ${admin}`), storedUs: await time(`Bearer ${stored}`) };
}

/** How much worse `value` is than `base`, in words: `3.1 % worse`, `2.0 % better`. */
export function overhead(value: number, base: number, higherIsBetter: boolean): string {
  const pct = higherIsBetter ? ((base - value) / base) * 100 : ((value - base) / base) * 100;
  return pct >= 0 ? `${pct.toFixed(1)} % worse` : `${(-pct).toFixed(1)} % better`;
}
