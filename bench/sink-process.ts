/**
 * A webhook sink in a child process of its own, for the benchmarks: the sink's CPU then does
 * not count against the sender's, as on a real network. `source` is CommonJS run with `node -e`;
 * it must listen on 127.0.0.1 port 0 and print the port on stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export async function startSinkProcess(
  source: string,
): Promise<{ child: ChildProcess; origin: string }> {
  const child = spawn(process.execPath, ['-e', source], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim()));
    child.once('exit', (code) => reject(new Error(`sink exited with ${code}`)));
  });
  return { child, origin: `http://127.0.0.1:${port}` };
}

/**
 * `count` processes each running `source` (CommonJS, `node -e`) with `argv`, stdin piped, and
 * what each wrote on stdout so far (`outputs[i]`, appended as it arrives): the bare senders.
 */
export function spawnScriptProcesses(
  source: string,
  argv: readonly string[],
  count: number,
): { children: ChildProcess[]; outputs: string[] } {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['-e', source, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const outputs = children.map(() => '');
  children.forEach((c, i) => c.stdout?.on('data', (d: Buffer) => (outputs[i] += d.toString())));
  return { children, outputs };
}
