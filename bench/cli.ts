/**
 * tickctl's start-up as a user meets it: wall time (median of N runs, and the best) of
 * `node -e 0` (the machine's floor for any Node program), `tickctl --help`, and one
 * `tickctl jobs get` against a real 1-node cluster, each a fresh process of bin/tickctl, next to
 * `npm run tickctl -- --help` (what npm's own start-up adds). Figures, never assertions.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ApiClient } from '../src/api/client.js';
import { ProcCluster } from '../test/helpers/cluster.js';
import { TEST_SECRET } from '../test/helpers/webhook-sink.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const TICKCTL = fileURLToPath(new URL('../bin/tickctl', import.meta.url));

export interface CliTiming {
  readonly what: string;
  readonly medianMs: number;
  readonly bestMs: number;
}

export interface CliResult {
  readonly runs: number;
  readonly timings: readonly CliTiming[];
  /** Whether bin/tickctl ran its bundle (false: dist/ stale or missing, the tsx fallback). */
  readonly bundled: boolean;
  readonly error?: string;
}

function timeRuns(what: string, cmd: string, args: readonly string[], runs: number): CliTiming {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8' });
    ms.push(performance.now() - t0);
    if (r.status !== 0) throw new Error(`${what} exited ${r.status}: ${r.stderr.slice(0, 300)}`);
  }
  ms.sort((a, b) => a - b);
  return { what, medianMs: ms[Math.floor(ms.length / 2)]!, bestMs: ms[0]! };
}

export async function runCli(opts: {
  runs: number;
  log: (line: string) => void;
}): Promise<CliResult> {
  const probe = spawnSync(process.execPath, [TICKCTL, '--version'], { encoding: 'utf8' });
  const bundled = probe.status === 0 && probe.stderr === '';
  if (!bundled) opts.log(`tickctl runs its sources through tsx: ${probe.stderr.trim()}`);
  const cluster = await ProcCluster.create({ nodes: 1, groups: 2 });
  try {
    cluster.startAll();
    await cluster.waitReady(60_000);
    const n = cluster.nodes[0]!;
    const endpoint = `${n.host}:${n.apiPort}`;
    const api = new ApiClient(endpoint, 5000, {}, cluster.clientOptions());
    await api.call('TenantService', 'CreateTenant', {
      tenantId: 'bench',
      signingSecret: TEST_SECRET,
    });
    await api.call('JobService', 'CreateJob', {
      jobId: 'bench-cli',
      spec: { tenant: 'bench', schedule: 'every 1h', target: { url: 'http://127.0.0.1:9/hook' } },
    });
    api.close();
    const node = process.execPath;
    const timings = [
      timeRuns('node -e 0', node, ['-e', '0'], opts.runs),
      timeRuns('tickctl --help', node, [TICKCTL, '--help'], opts.runs),
      timeRuns(
        'tickctl jobs get (one RPC)',
        node,
        [
          TICKCTL,
          'jobs',
          'get',
          'bench-cli',
          '--tenant',
          'bench',
          '--endpoint',
          endpoint,
          '--token-file',
          cluster.tokenFile,
        ],
        opts.runs,
      ),
      timeRuns(
        'npm run tickctl -- --help',
        'npm',
        ['run', '-s', 'tickctl', '--', '--help'],
        opts.runs,
      ),
    ];
    for (const x of timings)
      opts.log(`  ${x.what}: median ${x.medianMs.toFixed(0)} ms, best ${x.bestMs.toFixed(0)} ms`);
    return { runs: opts.runs, timings, bundled };
  } catch (err) {
    return {
      runs: opts.runs,
      timings: [],
      bundled,
      error: err instanceof Error ? err.message : String(err),
    };
  } finally {
    cluster.cleanup();
  }
}
