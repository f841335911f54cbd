// tickctl writing into a pipe whose reader has gone (`tickctl cluster status | head`) ends
// quietly with exit 0, as a Unix tool does, not with an unhandled EPIPE error.
import t from 'tap';
import { spawn } from 'node:child_process';
import { nodeCommand } from '../../helpers/node-child.js';
import { TICKCTL } from '../../helpers/tickctl.js';

t.test('a closed stdout pipe ends tickctl with exit 0 and no stack trace', async (t) => {
  const [command, argv] = nodeCommand([TICKCTL, 'jobs', 'create', '--help'], process.env);
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  // The reader goes away before tickctl writes: its first write fails with EPIPE.
  child.stdout.destroy();
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (err += c));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 0, 'exit 0');
  t.notMatch(err, /EPIPE|Unhandled/, 'nothing about the pipe on stderr');
});
