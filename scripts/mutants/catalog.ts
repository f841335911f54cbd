/**
 * The planted bugs of `npm run test:mutants` (scripts/mutants.ts): each one a small change a real
 * engineer could make, in one of the classes of bug the fast suites must catch (issue 22). A
 * mutant names the exact text it replaces; that text must occur exactly once in its file, or the
 * tool refuses to run, so an edit of the code that moves a mutant's target is noticed here.
 *
 * Each mutant lists the checks that should catch it, cheapest or most telling first: the tool
 * runs them in order and stops at the first that fails. The simulators come first where one
 * should catch the bug, so the table says whether random seeds find it, not only a scripted test.
 * Seeds are fixed (--from 1): a run of the table replays.
 */

export const MUTANT_CLASSES = [
  'commit rule',
  'vote check',
  'stale read',
  'lease',
  'recovery',
  'index re-sync',
  'predecessor runs',
  'snapshot field',
  'fsync',
  'Ready sync flag',
  'at-most-once ordering',
  'token floor',
] as const;

export type MutantClass = (typeof MUTANT_CLASSES)[number];

/** A command run in the root of the mutated copy; exit 0 means the mutant went unnoticed. */
export interface Check {
  /** Split on spaces and run without a shell (`npx …`). */
  readonly run: string;
  /** What the table shows; the command itself when absent. */
  readonly label?: string;
  /** Seconds after which the check counts as hung: the mutant is caught by timeout. */
  readonly timeoutSec: number;
}

export interface Mutant {
  readonly id: string;
  readonly class: MutantClass;
  /** Path from the project root. */
  readonly file: string;
  /** Text that occurs exactly once in `file`. */
  readonly find: string;
  readonly replace: string;
  /** The bug, in one line. */
  readonly description: string;
  readonly checks: readonly Check[];
}

// ---------------------------------------------------------------------------------------
// Checks. Seed counts keep each under ~30 s on one core (the whole table well under 15 min).

function raftSim(seeds: number): Check {
  return {
    run: `npx tsx test/sim/cli.ts --seeds ${seeds} --from 1`,
    label: `raft sim ${seeds} seeds`,
    timeoutSec: 180,
  };
}

function schedulerSim(seeds: number): Check {
  return {
    run: `npx tsx test/sim/cli.ts --scheduler --seeds ${seeds} --from 1`,
    label: `scheduler sim ${seeds} seeds`,
    timeoutSec: 240,
  };
}

/**
 * `npx tap <file>`; `grep` keeps only the top-level tests whose names match it (tap --grep, a
 * regular expression; no spaces, as the command is split on them: `.` stands for one).
 */
function tap(file: string, options: { grep?: string; timeoutSec?: number } = {}): Check {
  const grep = options.grep === undefined ? '' : `--grep=${options.grep} `;
  return {
    run: `npx tap ${grep}${file}`,
    label: `tap ${file}${options.grep === undefined ? '' : ` /${options.grep}/`}`,
    timeoutSec: options.timeoutSec ?? 120,
  };
}

const RAFT_SIM = raftSim(300);
const SCHEDULER_SIM = schedulerSim(150);
const RAFT_PAPER = tap('test/unit/raft/paper.test.ts');
const RAFT_SCENARIOS = tap('test/unit/raft/scenarios.test.ts');
/** The scripted parts (Figure 8 schedule, the checkers shown able to fail), not its seeds. */
const RAFT_SIM_SCRIPTED = tap('test/sim/sim.test.ts', { grep: '^(the.simulator|checker)' });
const DISPATCHER_UNIT = tap('test/unit/scheduler/dispatcher.test.ts');
const STATE_MACHINE_UNIT = tap('test/unit/scheduler/state-machine.test.ts');
const JOB_TABLE_UNIT = tap('test/unit/scheduler/job-table.test.ts');
/** One scripted scenario per failure-table row, and the checkers shown able to fail. */
const SCHEDULER_SIM_SCRIPTED = tap('test/sim/scheduler-sim.test.ts', { grep: '^(row|checker)' });
/** The node's store over a file system that drops unsynced writes (issue 22, item 5). */
const POWER_LOSS = tap('test/integration/power-loss.test.ts', { timeoutSec: 300 });
const STORAGE_DURABILITY = tap('test/unit/storage/durability.test.ts');
/** The production host and store over a simulated disk that loses unsynced writes. */
const HOST_SIM = tap('test/sim/host-sim.test.ts', { timeoutSec: 180 });
const STORAGE_NODE_STORE = tap('test/unit/storage/node-store.test.ts');

const SCHEDULER_CHECKS = [SCHEDULER_SIM, DISPATCHER_UNIT, SCHEDULER_SIM_SCRIPTED];

// ---------------------------------------------------------------------------------------

export const MUTANTS: readonly Mutant[] = [
  {
    id: 'commit-previous-term',
    class: 'commit rule',
    file: 'src/raft/raft.ts',
    find: 'if (index <= this.log.committed || !this.isCommittable(index)) return false;',
    replace: 'if (index <= this.log.committed) return false;',
    description:
      "the leader commits any quorum-replicated index, a previous term's entry too (Raft §5.4.2, Figure 8)",
    checks: [RAFT_SIM, RAFT_SIM_SCRIPTED, RAFT_PAPER, RAFT_SCENARIOS],
  },
  {
    id: 'vote-skips-up-to-date',
    class: 'vote check',
    file: 'src/raft/raft.ts',
    find: 'if (canVote && this.log.isUpToDate(m.index, m.logTerm) && !this.outranks(m)) {',
    replace:
      "if (canVote && (m.type === 'vote' || this.log.isUpToDate(m.index, m.logTerm)) && !this.outranks(m)) {",
    description:
      'the real vote skips the up-to-date check, as if the pre-vote had settled it (pre-vote keeps it)',
    checks: [RAFT_SIM, RAFT_PAPER, RAFT_SCENARIOS],
  },
  {
    id: 'read-index-unconfirmed',
    class: 'stale read',
    file: 'src/raft/raft.ts',
    find: '    this.admitRead(read);\n  }',
    replace: '    this.answerRead(read, undefined);\n  }',
    description:
      'a leader with a commit in its term answers ReadIndex at once, without a heartbeat round confirming it still leads',
    checks: [RAFT_SIM, RAFT_SIM_SCRIPTED, RAFT_SCENARIOS],
  },
  {
    id: 'lease-ready-orders',
    class: 'lease',
    file: 'src/scheduler/dispatcher.ts',
    find: 'if (leadership.leaseValid && ls.readyOrders.length > 0) {',
    replace: 'if (ls.readyOrders.length > 0) {',
    description:
      'an at-most-once order whose start has applied is sent without the lease (the commit taken as enough)',
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'lease-dispatch-when-caught-up',
    class: 'lease',
    file: 'src/scheduler/dispatcher.ts',
    find: '      if (leadership.leaseValid)\n        this.dispatch(',
    replace: '      if (leadership.caughtUp)\n        this.dispatch(',
    description:
      'due runs are handed to delivery once the leader has caught up, whether or not its lease holds',
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'lease-after-transfer',
    class: 'lease',
    file: 'src/raft/raft.ts',
    find: '    if (sentAt < this.lastTimeoutNowTick + this.config.electionTimeoutTicks) return false;\n',
    replace: '',
    description:
      'a heartbeat round sent before a TimeoutNow still backs the lease, though the transferee may already lead',
    checks: [SCHEDULER_SIM, RAFT_SCENARIOS, SCHEDULER_SIM_SCRIPTED],
  },
  {
    id: 'recovery-skipped',
    class: 'recovery',
    file: 'src/scheduler/dispatcher.ts',
    find: '    recovered: false,\n    lostPending: new Map(),\n    upstreamAskAt: new Map(),\n  };',
    replace:
      '    recovered: true,\n    lostPending: new Map(),\n    upstreamAskAt: new Map(),\n  };',
    description:
      "a new term starts as already recovered: the previous leader's at-most-once runs stay DISPATCHED, never UNKNOWN",
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'end-term-no-run-resync',
    class: 'index re-sync',
    file: 'src/scheduler/dispatcher.ts',
    find: '    this.index.syncRuns(this.sm, [...runs]);\n',
    replace: '',
    description:
      "a term's end re-derives the planning wheel but not the dispatch wheel: runs it had popped stay out of it",
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'end-term-no-job-resync',
    class: 'index re-sync',
    file: 'src/scheduler/dispatcher.ts',
    find: '    this.index.syncJobs(this.sm, [...ls.planQueue, ...ls.pendingIntents]);\n',
    replace: '',
    description:
      "a term's end does not put the jobs it had popped for planning back in the planning wheel",
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'follower-skips-dispatch-wheel',
    class: 'predecessor runs',
    file: 'src/scheduler/dispatcher.ts',
    find: '    this.index.syncRuns(this.sm, runs);\n',
    replace: '    if (this.leader) this.index.syncRuns(this.sm, runs);\n',
    description:
      'only the leader keeps the dispatch wheel: a new leader never dispatches the runs its predecessor planned',
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'restore-drops-last-token',
    class: 'snapshot field',
    file: 'src/scheduler/job-table.ts',
    find: 'lastToken: c.lastTokens[i]!,',
    replace: 'lastToken: 0,',
    description:
      "a snapshot restore loses each job's highest fencing token (the column is read back as 0)",
    checks: [SCHEDULER_SIM, STATE_MACHINE_UNIT, JOB_TABLE_UNIT, SCHEDULER_SIM_SCRIPTED],
  },
  {
    id: 'store-write-unsynced',
    class: 'fsync',
    file: 'src/storage/node-store.ts',
    find: 'await batch.write({ sync });',
    replace: 'await batch.write({ sync: false });',
    description:
      'the node store acknowledges every batch without fsync (kill -9 cannot see it: the page cache survives)',
    checks: [HOST_SIM, POWER_LOSS, STORAGE_DURABILITY, STORAGE_NODE_STORE],
  },
  {
    id: 'ready-entries-unsynced',
    class: 'Ready sync flag',
    file: 'src/raft/raw-node.ts',
    find: '        entries.length > 0 ||\n        r.log.unstableSnapshot !== undefined ||',
    replace: '        r.log.unstableSnapshot !== undefined ||',
    description:
      'a Ready with new entries but no term, vote or snapshot change says mustSync false: its entries are not fsynced',
    checks: [HOST_SIM, POWER_LOSS, RAFT_SIM, STORAGE_DURABILITY, STORAGE_NODE_STORE],
  },
  {
    id: 'host-syncs-only-if-every-ready',
    class: 'Ready sync flag',
    file: 'src/multiraft/host.ts',
    find: 'const sync = readies.some(([, rd]) => rd.mustSync);',
    replace: 'const sync = readies.every(([, rd]) => rd.mustSync);',
    description:
      "the host's group commit fsyncs only when every group's Ready needs it, not when any does",
    checks: [HOST_SIM, POWER_LOSS, STORAGE_DURABILITY],
  },
  {
    id: 'at-most-once-send-before-commit',
    class: 'at-most-once ordering',
    file: 'src/scheduler/dispatcher.ts',
    find: "ls.outbox.push({ op: 'attempt-started', atMs: nowMs, term: ls.term, fireId, attempt });\n        continue;\n",
    replace:
      "ls.outbox.push({ op: 'attempt-started', atMs: nowMs, term: ls.term, fireId, attempt });\n",
    description:
      'an at-most-once run is handed to delivery as its attempt-started is proposed, not once it has applied',
    checks: SCHEDULER_CHECKS,
  },
  {
    id: 'token-ignores-term-floor',
    class: 'token floor',
    file: 'src/scheduler/fencing.ts',
    find: 'const token = Math.max(lastToken + 1, floor);',
    replace: 'const token = lastToken > 0 ? lastToken + 1 : floor;',
    description:
      "only a job's first token starts at the term's floor: after a term change tokens stay in the old term's range",
    checks: [SCHEDULER_SIM, DISPATCHER_UNIT, STATE_MACHINE_UNIT],
  },
];
