/**
 * The steady part's reference without tickraft: the same fires, sent by 3 bare undici
 * processes (one per node, each a third of every second's fires), to the same recording sink
 * under the same rule, while the cluster is up and idle. What the lag of a whole second's fires
 * due at once costs on this machine with nothing of tickraft in the way: the steady target is
 * read against it.
 */
import type { ChildProcess } from 'node:child_process';
import { processCpuMs } from './proc-cpu.js';
import { BARE_REQUEST_SOURCE, spawnScriptProcesses } from './sink-process.js';

/**
 * One bare sender (CommonJS, `node -e`): a Pool of `connections` (argv) to `origin`. For the line
 * `<index> <procs> <rate> <start ms> <seconds>` on stdin it sends, at every whole second slot
 * from `start` on, the fires job i would get at that slot for every job i due at that second of
 * the minute (i % 60) with (i ÷ 60) % procs = index: the headers and body tickraft sends, made
 * 300 ms before the slot as the nodes render theirs ahead, all issued at the slot without
 * waiting for the previous second's answers. It writes `done` once every request was answered.
 */
const STEADY_BARE_SOURCE = `
const { Pool } = require('undici');
const [origin, connections] = [process.argv[1], Number(process.argv[2])];
const pool = new Pool(origin, { connections });
const sleepUntil = async (t) => { while (Date.now() < t) await new Promise((r) => setTimeout(r, Math.max(1, Math.min(50, t - Date.now() - 2)))); };
${BARE_REQUEST_SOURCE}
function requestsOf(index, procs, rate, at) {
  const second = (at / 1000) % 60;
  const out = [];
  for (let k = index; k < rate; k += procs)
    out.push(requestOf('bare-' + String(second + 60 * k).padStart(7, '0'), at));
  return out;
}
async function run(index, procs, rate, start, seconds) {
  const sends = [];
  for (let s = 0; s < seconds; s++) {
    const at = start + s * 1000;
    await sleepUntil(at - 300);
    const requests = requestsOf(index, procs, rate, at);
    await sleepUntil(at);
    for (const r of requests) sends.push(pool.request(r).then((res) => res.body.dump()));
  }
  await Promise.all(sends);
  process.stdout.write('done\\n');
}
let buffered = '';
process.stdin.on('data', (d) => {
  buffered += d;
  const nl = buffered.indexOf('\\n');
  if (nl < 0) return;
  const [index, procs, rate, start, seconds] = buffered.slice(0, nl).split(' ').map(Number);
  buffered = '';
  run(index, procs, rate, start, seconds).catch((err) => { console.error(err); process.exit(1); });
});
`;

/** The job ids the bare senders use: the recording sink reads the index after the last '-'. */
export const BARE_JOB_PREFIX = 'bare';

/** `procs` bare sender processes sending every second's fires of `rate` jobs a second. */
export class BareSteadySenders {
  private readonly children: ChildProcess[];
  private readonly outputs: string[];

  constructor(
    origin: string,
    private readonly procs: number,
    connections: number,
  ) {
    ({ children: this.children, outputs: this.outputs } = spawnScriptProcesses(
      STEADY_BARE_SOURCE,
      [origin, String(connections)],
      procs,
    ));
  }

  /**
   * Sends `seconds` whole seconds of fires from the whole second `startMs` on (at least 1 s
   * away, for the first second's rendering) and resolves once all were answered.
   */
  async run(rate: number, startMs: number, seconds: number): Promise<void> {
    if (startMs % 1000 !== 0) throw new Error(`startMs ${startMs} is not a whole second`);
    this.children.forEach((c, i) =>
      c.stdin?.write(`${i} ${this.procs} ${rate} ${startMs} ${seconds}\n`),
    );
    const deadline = startMs + seconds * 1000 + 120_000;
    while (!this.outputs.every((o) => o.includes('done'))) {
      if (this.children.some((c) => c.exitCode !== null))
        throw new Error('a bare steady sender exited');
      if (Date.now() > deadline) throw new Error('the bare steady senders did not finish');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The senders' CPU so far (all processes), ms. */
  cpuNow(): number {
    return this.children.reduce((sum, c) => sum + processCpuMs(c.pid ?? 0), 0);
  }

  close(): void {
    for (const c of this.children) c.kill();
  }
}
