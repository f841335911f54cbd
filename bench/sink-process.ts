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
