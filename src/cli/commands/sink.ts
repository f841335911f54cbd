/**
 * `tickctl sink`: a demo webhook receiver. It prints one line per fire as it arrives (receipt
 * time, job, fire id, slot, lag behind the slot, attempt, fencing token, and the signature check
 * when it knows the tenant's secret) and answers 200, so a newcomer sees jobs fire. It is a demo,
 * not a production receiver: it keeps no fencing state and accepts every request.
 * SIGINT or SIGTERM stop it with exit 0.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Command } from 'commander';
import { ValidationError } from '../../base/errors.js';
import { parseHostPort } from '../../config/node-config.js';
import { compileSigningKeys, verifyWebhook, type SigningKeys } from '../../delivery/signing.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type CliRun } from '../io.js';

/** Requests larger than this are answered 413 and not printed. */
const BODY_MAX = 1024 * 1024;

interface SinkFlags {
  listen: string;
  secret?: string;
}

export function registerSinkCommand(program: Command, run: CliRun): void {
  program
    .command('sink')
    .description(
      'run a demo webhook receiver that prints each fire as it arrives and answers 200 (Ctrl-C stops it)',
    )
    .option('--listen <host:port>', 'address to listen on', '127.0.0.1:8080')
    .option(
      '--secret <whsec>',
      "the tenant's signing secret: each fire's signature is then checked (ok / BAD)",
    )
    .action(async (o: SinkFlags) => {
      run.exitCode = await runSink(run, o);
    });
}

async function runSink(run: CliRun, o: SinkFlags): Promise<number> {
  const io = run.io;
  const hp = parseHostPort(o.listen);
  if (typeof hp === 'string') {
    io.writeErr(`tickctl sink: --listen: ${hp}\n`);
    return EXIT_USAGE;
  }
  let keys: SigningKeys | undefined;
  if (o.secret !== undefined) {
    try {
      keys = compileSigningKeys([o.secret]);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      io.writeErr(`tickctl sink: --secret ${err.violations[0]?.reason ?? err.message}\n`);
      return EXIT_USAGE;
    }
  }
  let fires = 0;
  const server = createServer((req, res) => {
    readBody(req, res, (body) => {
      fires++;
      io.writeOut(`${describe(req, body, keys, io.clock.nowMs())}\n`);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    });
  });
  const listening = await new Promise<number | Error>((resolve) => {
    server.once('error', (err) => resolve(err));
    server.listen(hp.port, hp.host, () => resolve((server.address() as AddressInfo).port));
  });
  if (listening instanceof Error) {
    const code = (listening as NodeJS.ErrnoException).code ?? listening.message;
    io.writeErr(
      `tickctl sink: cannot listen on ${o.listen}: ${code} (another sink running? pick another --listen)\n`,
    );
    return EXIT_FAILURE;
  }
  io.writeOut(
    `tickctl sink: listening on http://${hp.host}:${listening}/ ` +
      `(signatures ${keys ? 'checked' : 'not checked: pass --secret to check them'}); Ctrl-C stops\n`,
  );
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  io.writeOut(`tickctl sink: stopped (${signal}) after ${fires} request(s)\n`);
  return EXIT_OK;
}

function readBody(req: IncomingMessage, res: ServerResponse, done: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size <= BODY_MAX) chunks.push(c);
  });
  req.on('end', () => {
    if (size > BODY_MAX) res.writeHead(413).end();
    else done(Buffer.concat(chunks));
  });
}

/** One line per request: a tickraft fire's fields, or what little an unknown request has. */
function describe(
  req: IncomingMessage,
  body: Buffer,
  keys: SigningKeys | undefined,
  nowMs: number,
): string {
  const at = new Date(nowMs).toISOString();
  let fire: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'fireId' in parsed) fire = parsed;
  } catch {
    // Not JSON: printed as a foreign request below.
  }
  let sig = 'unchecked';
  if (keys) {
    const v = verifyWebhook(req.headers, body, keys, { nowMs });
    sig = v.ok ? 'ok' : `BAD (${v.reason})`;
  }
  if (!fire)
    return `${at}  ${req.method ?? '?'} ${req.url ?? ''}: not a tickraft fire (${body.length} bytes)`;
  const slotMs = typeof fire['slotMs'] === 'number' ? fire['slotMs'] : Number.NaN;
  return (
    `${at}  job ${str(fire['jobId'])}  fire ${str(fire['fireId'])}  slot ${str(fire['slot'])}` +
    `  ${lagText(nowMs - slotMs, fire['attempt'])}  attempt ${str(fire['attempt'])}  token ${str(fire['fencingToken'])}  signature ${sig}`
  );
}

/** Beyond this a fire is not late delivery of a slot just due but a slot long past. */
const LAG_SHOWN_MS_MAX = 60_000;

/**
 * `lag 42ms` for a slot just due; `age 3h 2m (…)` for one long past. A slot long past (a backfill, a catch-up after downtime, or a
 * retry after backoff: the body does not say which) is shown by its age, not as a lag in ms.
 */
export function lagText(lagMs: number, attempt: unknown): string {
  if (!Number.isFinite(lagMs)) return 'lag ?';
  if (lagMs < LAG_SHOWN_MS_MAX) return `lag ${lagMs}ms`;
  const why = typeof attempt === 'number' && attempt > 1 ? 'a retry' : 'a backfill or catch-up';
  return `age ${age(lagMs)} (${why})`;
}

/** `3h 2m`, `2d 4h`, `5m 7s`: the two largest units. */
function age(ms: number): string {
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ];
  const i = units.findIndex(([, size]) => ms >= size);
  const [bigName, big] = units[i]!;
  const whole = Math.floor(ms / big);
  const next = units[i + 1];
  if (next === undefined) return `${whole}${bigName}`;
  return `${whole}${bigName} ${Math.floor((ms % big) / next[1])}${next[0]}`;
}

function str(v: unknown): string {
  return typeof v === 'string' || typeof v === 'number' ? String(v) : '?';
}
