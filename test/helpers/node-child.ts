/**
 * Node child processes without tap's process-info loader. tap runs each test file with
 * @tapjs/processinfo in NODE_OPTIONS and, at every spawn, puts it back into the child's
 * NODE_OPTIONS (whatever `env` the caller gives), so every `tickraft serve`, tickctl, npm or helper
 * process a test starts loads it too: on Node 20 a module-loader thread of its own, about a second
 * more of start-up per process on a loaded 2-core machine (tickctl: 0.3 s alone, 1.2–2.5 s with
 * it), for coverage bookkeeping the suite turns off (package.json: disable-coverage).
 * `nodeCommand` and `withoutTapLoaderCommand` give the command that starts the child through
 * env(1) with NODE_OPTIONS as it was minus that loader (any other option is kept), so the child
 * runs as it would outside tap; outside tap they are the plain command.
 */

/** The words of a NODE_OPTIONS value: blanks separate them, double quotes group, \ escapes. */
function optionWords(text: string): string[] {
  const out: string[] = [];
  let cur: string | undefined;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted && ch === '\\' && i + 1 < text.length) cur = (cur ?? '') + text[++i];
    else if (ch === '"') {
      quoted = !quoted;
      cur ??= '';
    } else if (!quoted && /\s/.test(ch)) {
      if (cur !== undefined) out.push(cur);
      cur = undefined;
    } else cur = (cur ?? '') + ch;
  }
  if (cur !== undefined) out.push(cur);
  return out;
}

const TAP_LOADER = /@tapjs[\\/]processinfo/;

/** NODE_OPTIONS without tap's loader (`--import=…` or `--import …`, and --loader forms). */
export function withoutTapLoader(nodeOptions: string): string {
  const words = optionWords(nodeOptions);
  const kept: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (TAP_LOADER.test(w)) continue;
    if (/^--(import|loader|experimental-loader)$/.test(w) && TAP_LOADER.test(words[i + 1] ?? '')) {
      i++;
      continue;
    }
    kept.push(w);
  }
  return kept.map((w) => `"${w.replace(/["\\]/g, '\\$&')}"`).join(' ');
}

/**
 * The command and arguments for spawn() that run `command <args>` with `env` (default: this
 * process's) and tap's loader left out of NODE_OPTIONS, for node and for what starts node (npm).
 */
export function withoutTapLoaderCommand(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): [string, string[]] {
  const options = env['NODE_OPTIONS'] || (process.env['NODE_OPTIONS'] ?? '');
  if (!TAP_LOADER.test(options)) return [command, [...args]];
  return ['env', [`NODE_OPTIONS=${withoutTapLoader(options)}`, command, ...args]];
}

/** The command and arguments for spawn() that run `node <args>` (see withoutTapLoaderCommand). */
export function nodeCommand(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): [string, string[]] {
  return withoutTapLoaderCommand(process.execPath, args, env);
}
