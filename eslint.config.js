// ESLint flat config. Three jobs beyond style: type-aware promise and `any` rules, layering
// (a folder imports only from the layers below it, docs/ARCHITECTURE.md, Layers), and purity: the
// deterministic folders never touch the clock, timers, randomness or I/O, so one seed replays a
// whole cluster.
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

/** Folders whose code must stay deterministic: inputs only, no ambient effects. */
export const PURE_FOLDERS = [
  'src/base/**/*.ts',
  'src/raft/**/*.ts',
  'src/schedule/**/*.ts',
  'src/scheduler/state-machine*.ts',
  'src/scheduler/commands.ts',
  'src/scheduler/model.ts',
  'src/scheduler/job-key.ts',
  'src/scheduler/fencing.ts',
  'src/scheduler/run-lifecycle.ts',
  'src/scheduler/timing-wheel*.ts',
  'src/scheduler/due-index*.ts',
  'src/scheduler/intent-planner*.ts',
  'src/scheduler/dispatcher*.ts',
  'src/placement/*-plan.ts',
  'src/placement/meta-state.ts',
  'src/placement/membership-state.ts',
  'src/placement/ring.ts',
  'src/placement/hash.ts',
  'chaos/checkers/**/*.ts',
  'chaos/checker/**/*.ts',
  'chaos/history/format.ts',
  'chaos/history/codec.ts',
  'src/delivery/classify.ts',
  'src/delivery/backoff.ts',
  'src/delivery/fair-queue.ts',
  'src/delivery/queue-ages.ts',
  'src/observe/tenant-labels.ts',
];

/** The one place that may read the wall clock inside src/base. */
const CLOCK_IMPL = 'src/base/clock.ts';

const ioModules = [
  'node:*',
  'fs',
  'fs/*',
  'net',
  'http',
  'https',
  'http2',
  'dgram',
  'child_process',
  'worker_threads',
  'timers',
  'timers/*',
  'perf_hooks',
  'crypto',
  'os',
  'undici',
  '@grpc/*',
  'classic-level',
  'level',
];

export const purityRules = {
  'no-restricted-imports': [
    'error',
    {
      patterns: [
        {
          group: ioModules,
          message:
            'deterministic code may not do I/O: take what you need as an argument ' +
            '(docs/ARCHITECTURE.md, Layers).',
        },
      ],
    },
  ],
  'no-restricted-globals': [
    'error',
    { name: 'Date', message: 'read time from an argument (virtual time in tests), not Date.' },
    { name: 'setTimeout', message: 'timers belong to the runtime; the core is driven by tick().' },
    { name: 'setInterval', message: 'timers belong to the runtime; the core is driven by tick().' },
    {
      name: 'setImmediate',
      message: 'timers belong to the runtime; the core is driven by tick().',
    },
    { name: 'queueMicrotask', message: 'the core is synchronous.' },
    { name: 'performance', message: 'read time from an argument, not performance.now().' },
    { name: 'process', message: 'the core reads no environment, clock or exit hooks.' },
    { name: 'fetch', message: 'deterministic code may not do I/O.' },
    { name: 'crypto', message: 'randomness comes from an injected Rand (src/base/rand.ts).' },
  ],
  'no-restricted-properties': [
    'error',
    { object: 'Math', property: 'random', message: 'use the injected Rand (src/base/rand.ts).' },
  ],
};

/** Layering: each entry forbids a folder from importing the folders above it. */
const layers = [
  'base',
  'raft',
  'storage',
  'transport',
  'multiraft',
  'placement',
  'schedule',
  'scheduler',
  'delivery',
  // The cluster operations (membership, moves, rebalance, splits): src/api's AdminService
  // handlers call them, and they reach other nodes only through the ClusterContext it hands in.
  'cluster',
  'api',
  // The HTTP/JSON API: a gateway in front of src/api's gRPC services (it calls them over gRPC).
  'http',
  'observe',
  'config',
  'cli',
];
// schedule/ is pure and has no Raft dependency; it may be imported by any later layer.
const layerZones = layers.slice(0, -1).map((folder, i) => ({
  target: `./src/${folder}`,
  from: layers.slice(i + 1).map((upper) => `./src/${upper}`),
  message: `src/${folder} sits below these layers and may not import them (docs/ARCHITECTURE.md).`,
}));

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      '.tap/**',
      '.tickraft/**',
      'test/lint/fixtures/**',
      'sim-artifacts/**',
      'scratch/**',
    ],
  },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.js', 'bin/launch.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createTypeScriptImportResolver({ alwaysTryTypes: true })],
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/explicit-module-boundary-types': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
      'import-x/no-cycle': 'error',
      'import-x/no-restricted-paths': ['error', { zones: layerZones }],
      'max-lines-per-function': ['warn', { max: 90, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    files: PURE_FOLDERS,
    ignores: [CLOCK_IMPL],
    rules: purityRules,
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // tap's t.test() returns a promise that tap itself awaits; every other promise still counts.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['test', 'only', 'skip', 'todo'], package: '@tapjs/core' },
            { from: 'package', name: ['test', 'only', 'skip', 'todo'], package: '@tapjs/test' },
          ],
        },
      ],
      'max-lines-per-function': 'off',
      '@typescript-eslint/explicit-module-boundary-types': 'off',
    },
  },
  {
    // Plain JavaScript that runs before any build (bin/launch.js picks dist/ or the sources).
    files: ['eslint.config.js', 'bin/launch.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // JavaScript has no type annotations to ask for.
    files: ['bin/launch.js'],
    rules: { '@typescript-eslint/explicit-module-boundary-types': 'off' },
  },
);
