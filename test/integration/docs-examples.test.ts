// The command examples of README.md ("Use it"), docs/API.md ("tickctl") and docs/workflows.md run as written against
// a real local 3-node cluster (a fresh one per document). Marker convention, on the fence line:
//
//   ```sh example             each command runs in order (`a && b` is two) and must exit 0
//   ```sh example-background  each command starts and keeps running while the later examples
//                             run; at the end it gets SIGINT and must exit 0
//   ```sh example-not-run     not run (it needs what a local 3-node cluster lacks): each tickctl
//                             command must exist and use only flags its --help lists
//   ```text output            what the previous example block's last command prints: each line
//                             must appear in its output, in order, where a field holding a digit
//                             stands for any value (times, ids, tokens)
//
// Every ```sh block of those sections must carry one of the markers, so a new example cannot
// escape the test. `npm run tickctl --` and `tickctl` both run bin/tickctl, with the cluster's
// endpoint in TICKCTL_ENDPOINT; the demo sink's fixed address 127.0.0.1:8080 is mapped to a
// random loopback address of the test's own (a `sink` without --listen gets it).
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { endpointOf } from '../helpers/api-cluster.js';
import { eventually, freePort, ProcCluster, randomLoopbackHost } from '../helpers/cluster.js';
import { nodeCommand } from '../helpers/node-child.js';
import { runTickctl, TICKCTL } from '../helpers/tickctl.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SINK_IN_DOCS = '127.0.0.1:8080';

type Kind = 'example' | 'example-background' | 'example-not-run';

interface Block {
  readonly kind: Kind;
  readonly line: number;
  readonly commands: string[][];
  output?: string[];
}

/** The text of a Markdown section: from its heading to the next heading of the same level. */
function section(text: string, heading: string): { body: string; firstLine: number } {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l === heading);
  if (start < 0) throw new Error(`no section "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i++) {
    const m = /^(#+) /.exec(lines[i]!);
    if (m && m[1]!.length <= level) {
      end = i;
      break;
    }
  }
  return { body: lines.slice(start, end).join('\n'), firstLine: start + 1 };
}

/** Splits a shell command line into words: quotes, backslashes, a trailing # comment. */
function words(line: string): string[] {
  const out: string[] = [];
  let cur: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === "'") {
      const j = line.indexOf("'", i + 1);
      if (j < 0) throw new Error(`unclosed ' in ${line}`);
      cur = (cur ?? '') + line.slice(i + 1, j);
      i = j;
    } else if (ch === '"') {
      let j = i + 1;
      let s = '';
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && j + 1 < line.length) j++;
        s += line[j];
      }
      if (j >= line.length) throw new Error(`unclosed " in ${line}`);
      cur = (cur ?? '') + s;
      i = j;
    } else if (ch === '\\' && i + 1 < line.length) {
      cur = (cur ?? '') + line[++i];
    } else if (ch === ' ' || ch === '\t') {
      if (cur !== undefined) out.push(cur);
      cur = undefined;
    } else if (ch === '#' && cur === undefined) {
      break;
    } else cur = (cur ?? '') + ch;
  }
  if (cur !== undefined) out.push(cur);
  return out;
}

/** The commands of a block: continuation lines joined, `a && b` split in two. */
function commandsOf(body: string[]): string[][] {
  const joined: string[] = [];
  let pending = '';
  for (const l of body) {
    if (l.endsWith('\\')) pending += `${l.slice(0, -1)} `;
    else {
      joined.push(pending + l);
      pending = '';
    }
  }
  const out: string[][] = [];
  for (const line of joined) {
    let cur: string[] = [];
    for (const w of words(line)) {
      if (w === '&&') {
        out.push(cur);
        cur = [];
      } else cur.push(w);
    }
    if (cur.length > 0) out.push(cur);
  }
  return out;
}

/** The ```sh blocks of a section with their markers, and each block's ```text output. */
function blocksOf(file: string, heading: string): Block[] {
  const { body, firstLine } = section(readFileSync(`${ROOT}${file}`, 'utf8'), heading);
  const lines = body.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!fence) continue;
    const end = lines.indexOf('```', i + 1);
    const content = lines.slice(i + 1, end);
    const [lang, info] = [fence[1], fence[2]!.trim()];
    if (lang === 'sh') {
      if (!['example', 'example-background', 'example-not-run'].includes(info))
        throw new Error(`${file}:${firstLine + i}: a sh block without an example marker`);
      blocks.push({ kind: info as Kind, line: firstLine + i, commands: commandsOf(content) });
    } else if (lang === 'text' && info === 'output') {
      const last = blocks.at(-1);
      if (!last) throw new Error(`${file}:${firstLine + i}: output before any example`);
      last.output = content;
    }
    i = end;
  }
  return blocks;
}

/** The tickctl arguments of a documented command, or an error naming what is not tickctl. */
function tickctlArgs(cmd: string[], sink: string): string[] {
  let args: string[];
  if (cmd[0] === 'npm' && cmd[1] === 'run' && cmd[2] === 'tickctl' && cmd[3] === '--')
    args = cmd.slice(4);
  else if (cmd[0] === 'tickctl') args = cmd.slice(1);
  else throw new Error(`not a tickctl command: ${cmd.join(' ')}`);
  args = args.map((a) => a.split(SINK_IN_DOCS).join(sink));
  if (args[0] === 'sink' && !args.includes('--listen')) args.push('--listen', sink);
  return args;
}

/** Each line of the sample appears in the output, in order; fields with a digit match anything. */
function matchesShape(output: string, sample: string[]): string | undefined {
  const lines = output.split('\n');
  let at = 0;
  for (const s of sample) {
    const want = s.trim().split(/\s+/);
    const fits = (l: string): boolean => {
      const got = l.trim().split(/\s+/);
      return got.length === want.length && want.every((w, k) => /\d/.test(w) || w === got[k]);
    };
    while (at < lines.length && !fits(lines[at]!)) at++;
    if (at === lines.length) return `no line shaped like: ${s}`;
    at++;
  }
  return undefined;
}

interface Background {
  readonly cmd: string;
  readonly proc: ChildProcess;
  out: string;
  readonly exit: Promise<number | null>;
  readonly output: string[] | undefined;
}

function startBackground(args: string[], env: NodeJS.ProcessEnv, output?: string[]): Background {
  const [command, argv] = nodeCommand([TICKCTL, ...args], env);
  const proc = spawn(command, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const b: Background = {
    cmd: `tickctl ${args.join(' ')}`,
    proc,
    out: '',
    exit: new Promise((resolve) => proc.on('close', (code) => resolve(code))),
    output,
  };
  proc.stdout.setEncoding('utf8').on('data', (c: string) => (b.out += c));
  proc.stderr.setEncoding('utf8').on('data', (c: string) => (b.out += c));
  return b;
}

const helpFlags = new Map<string, Set<string>>();
/** The flags `tickctl <words…> --help` lists (long and short forms). */
async function flagsOf(sub: string[], env: NodeJS.ProcessEnv): Promise<Set<string>> {
  const key = sub.join(' ');
  let flags = helpFlags.get(key);
  if (!flags) {
    const r = await runTickctl([...sub, '--help'], { env });
    if (r.code !== 0) throw new Error(`tickctl ${key} --help exited ${r.code}: ${r.stderr}`);
    flags = new Set([...r.stdout.matchAll(/(?<![\w-])--?[a-z][a-z-]*/g)].map((m) => m[0]));
    helpFlags.set(key, flags);
  }
  return flags;
}

async function runDoc(t: Test, file: string, heading: string): Promise<void> {
  const blocks = blocksOf(file, heading);
  t.ok(
    blocks.some((b) => b.kind === 'example'),
    `${file} "${heading}" has examples`,
  );
  const cluster = await ProcCluster.create({ groups: 4, extraArgs: ['--tick-ms', '20'] });
  const background: Background[] = [];
  t.teardown(() => {
    for (const b of background) if (b.proc.exitCode === null) b.proc.kill('SIGKILL');
    cluster.cleanup();
  });
  const sinkHost = randomLoopbackHost();
  const sink = `${sinkHost}:${await freePort(sinkHost)}`;
  cluster.startAll();
  await cluster.waitReady(60_000);
  // As after `npm start`, whose admin token tickctl finds by itself.
  const env = {
    ...process.env,
    TICKCTL_ENDPOINT: endpointOf(cluster.nodes[0]!),
    TICKRAFT_TOKEN: cluster.adminToken,
  };
  for (const block of blocks) {
    const where = `${file}:${block.line}`;
    if (block.kind === 'example-not-run') {
      for (const cmd of block.commands) {
        const args = tickctlArgs(cmd, sink);
        // The subcommand path: a command group and its command (`cluster drain-node`).
        const path = args.slice(0, 2);
        const flags = await flagsOf(path, env);
        for (const a of args.filter((x) => x.startsWith('-')))
          t.ok(flags.has(a), `${where}: tickctl ${path.join(' ')} accepts ${a}`);
      }
      continue;
    }
    for (const [k, cmd] of block.commands.entries()) {
      const args = tickctlArgs(cmd, sink);
      const last = k === block.commands.length - 1;
      if (block.kind === 'example-background') {
        const b = startBackground(args, env, last ? block.output : undefined);
        background.push(b);
        // Running once it has said so (its first line), and not exited.
        await eventually(() => {
          if (b.proc.exitCode !== null)
            throw new Error(`${b.cmd} exited ${b.proc.exitCode}: ${b.out}`);
          if (b.out === '') throw new Error(`${b.cmd} printed nothing yet`);
          return Promise.resolve();
        }, 30_000).catch((err: unknown) => t.fail(`${where}: ${String(err)}`));
        continue;
      }
      const r = await runTickctl(args, { env, t });
      t.equal(r.code, 0, `${where}: tickctl ${args.join(' ')}`, {
        stdout: r.stdout.slice(-2000),
        stderr: r.stderr.slice(-2000),
      });
      if (last && block.output) {
        const why = matchesShape(r.stdout, block.output);
        t.notOk(why, `${where}: the output has the documented shape`, { stdout: r.stdout });
      }
    }
  }
  for (const b of background) {
    if (b.output) {
      const sample = b.output;
      await eventually(() => {
        const why = matchesShape(b.out, sample);
        if (why) throw new Error(why);
        return Promise.resolve();
      }, 20_000).then(
        () => t.pass(`${b.cmd}: its output has the documented shape`),
        (err: unknown) => t.fail(`${b.cmd}: ${String(err)}\n${b.out}`),
      );
    }
    b.proc.kill('SIGINT');
    t.equal(await b.exit, 0, `${b.cmd} stops on SIGINT with exit 0`, {
      output: b.out.slice(-2000),
    });
  }
}

t.test('README.md: Use it', (t) => runDoc(t, 'README.md', '### Use it'));
t.test('docs/API.md: tickctl', (t) => runDoc(t, 'docs/API.md', '## tickctl'));
t.test('docs/workflows.md', (t) => runDoc(t, 'docs/workflows.md', '# Workflows'));
