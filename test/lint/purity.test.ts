// The deterministic core stays deterministic because lint refuses the clock, timers, randomness
// and I/O inside it. This test lints small snippets as if they lived in src/raft (and the other
// pure folders) through the project's real ESLint config, and checks each one is rejected with
// the rule that names the problem; the same snippets placed in a runtime folder pass.
import t from 'tap';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

// The probes are virtual files the TypeScript project does not contain, so type-aware rules are
// switched off for them; every purity and layering rule is syntactic and stays on.
const eslint = new ESLint({
  cwd: process.cwd(),
  overrideConfig: [tseslint.configs.disableTypeChecked],
});

async function ruleIdsFor(code: string, filePath: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).map((m) => m.ruleId ?? `fatal: ${m.message}`);
}

const FORBIDDEN: [string, string, string][] = [
  ['wall clock', 'export const now = Date.now();\n', 'no-restricted-globals'],
  ['new Date()', 'export const d = new Date();\n', 'no-restricted-globals'],
  ['Math.random', 'export const r = Math.random();\n', 'no-restricted-properties'],
  ['setTimeout', 'setTimeout(() => undefined, 1);\n', 'no-restricted-globals'],
  ['setInterval', 'export const h = setInterval(() => undefined, 1);\n', 'no-restricted-globals'],
  ['performance.now', 'export const p = performance.now();\n', 'no-restricted-globals'],
  ['process', 'export const e = process.env;\n', 'no-restricted-globals'],
  [
    'node:fs import',
    "import { readFileSync } from 'node:fs';\nexport const f = readFileSync;\n",
    'no-restricted-imports',
  ],
  [
    'net import',
    "import { createServer } from 'node:net';\nexport const s = createServer;\n",
    'no-restricted-imports',
  ],
  [
    'undici import',
    "import { request } from 'undici';\nexport const q = request;\n",
    'no-restricted-imports',
  ],
  [
    'grpc import',
    "import * as grpc from '@grpc/grpc-js';\nexport const g = grpc;\n",
    'no-restricted-imports',
  ],
  [
    'classic-level import',
    "import { ClassicLevel } from 'classic-level';\nexport const c = ClassicLevel;\n",
    'no-restricted-imports',
  ],
];

for (const folder of ['src/raft', 'src/schedule', 'src/base']) {
  t.test(`lint rejects clock, timers, randomness and I/O in ${folder}`, async (t) => {
    for (const [what, code, rule] of FORBIDDEN) {
      const ids = await ruleIdsFor(code, `${folder}/lint-probe.ts`);
      t.ok(
        ids.includes(rule),
        `${what} in ${folder} is reported by ${rule} (got ${ids.join(', ') || 'nothing'})`,
      );
    }
  });
}

t.test('the same code is allowed in a runtime folder', async (t) => {
  const ids = await ruleIdsFor(
    'export const now = Date.now() + Math.random();\n',
    'src/multiraft/lint-probe.ts',
  );
  t.notOk(
    ids.includes('no-restricted-globals') || ids.includes('no-restricted-properties'),
    ids.join(', '),
  );
});

t.test('src/raft may not import a higher layer', async (t) => {
  const ids = await ruleIdsFor(
    "import { parseSchedule } from '../schedule/parse.js';\nexport const y = parseSchedule;\n",
    'src/raft/lint-probe.ts',
  );
  t.ok(
    ids.some((id) => id === 'import-x/no-restricted-paths' || id.startsWith('fatal')),
    ids.join(', '),
  );
});

// src/cluster (the cluster operations) sits between src/delivery and src/api: the AdminService
// handlers call it, and it reaches the router only through the ClusterContext src/api hands in.
const RESTRICTED = 'import-x/no-restricted-paths';

t.test('src/cluster may not import src/api, not even its types', async (t) => {
  for (const code of [
    "import { sleep } from '../api/router.js';\nexport const y = sleep;\n",
    "import type { ApiContext } from '../api/api-context.js';\nexport type Y = ApiContext;\n",
  ]) {
    const ids = await ruleIdsFor(code, 'src/cluster/lint-probe.ts');
    t.ok(ids.includes(RESTRICTED), ids.join(', ') || 'nothing reported');
  }
});

t.test('src/api may import src/cluster; the layers below it may not', async (t) => {
  const code =
    "import { groupLeaderOf } from '../cluster/group-leader.js';\nexport const y = groupLeaderOf;\n";
  const fromApi = await ruleIdsFor(code, 'src/api/lint-probe.ts');
  t.notOk(fromApi.includes(RESTRICTED), fromApi.join(', '));
  for (const folder of ['src/delivery', 'src/placement']) {
    const ids = await ruleIdsFor(code, `${folder}/lint-probe.ts`);
    t.ok(ids.includes(RESTRICTED), `${folder}: ${ids.join(', ') || 'nothing reported'}`);
  }
});

t.test('clean pure code passes', async (t) => {
  const ids = await ruleIdsFor(
    'export function add(a: number, b: number): number {\n  return a + b;\n}\n',
    'src/raft/lint-probe.ts',
  );
  t.same(ids, []);
});
