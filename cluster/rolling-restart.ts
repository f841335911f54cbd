/**
 * `npm run rolling-restart`: asks the running `npm start` supervisor (its pid is in
 * $TICKRAFT_HOME/start.pid, default ./.tickraft) to restart its nodes one at a time, and
 * follows the progress it writes to $TICKRAFT_HOME/rolling-restart.log. Exits 0 when every node
 * is back and caught up, 1 when the restart failed or did not finish in time.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const home = resolve(process.env['TICKRAFT_HOME'] ?? '.tickraft');
const pidFile = join(home, 'start.pid');
const logFile = join(home, 'rolling-restart.log');
const TIMEOUT_MS = 10 * 60_000;

if (!existsSync(pidFile)) {
  console.error(`no cluster is running from ${home} (no start.pid): start one with npm start`);
  process.exit(1);
}
const pid = Number(readFileSync(pidFile, 'utf8').trim());
writeFileSync(logFile, '');
try {
  process.kill(pid, 'SIGHUP');
} catch (err) {
  console.error(
    `could not signal the npm start process ${pid}: ${err instanceof Error ? err.message : String(err)}`,
  );
  process.exit(1);
}
const deadline = Date.now() + TIMEOUT_MS;
let shown = 0;
for (;;) {
  const lines = readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  for (const line of lines.slice(shown)) console.log(line);
  shown = lines.length;
  const last = lines[lines.length - 1] ?? '';
  if (last.startsWith('done')) process.exit(0);
  if (last.startsWith('failed')) process.exit(1);
  if (Date.now() > deadline) {
    console.error(`the rolling restart did not finish within ${TIMEOUT_MS / 60_000} minutes`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 200));
}
