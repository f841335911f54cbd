/**
 * Raft options in the three stages used across tickraft: RaftOptions (user-facing, optional,
 * defaults documented) → compileRaftOptions() (defaults, cross-field checks) → CompiledRaftConfig
 * (frozen). Every message names the option and the rule it broke.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';

export interface RaftOptions {
  /** Ticks without hearing from a leader before a follower campaigns. @default 10 */
  electionTimeoutTicks?: number;
  /**
   * A follower's election timer runs out after electionTimeoutTicks plus a random share of
   * this many ticks, drawn anew at each term: the spread that keeps two followers from
   * campaigning at once. A narrower spread replaces a dead leader sooner in the worst case;
   * the lease does not depend on it (voters ignore candidates for electionTimeoutTicks).
   * @default electionTimeoutTicks
   */
  electionJitterTicks?: number;
  /** Ticks between leader heartbeats; must be well below the election timeout. @default 1 */
  heartbeatTicks?: number;
  /**
   * Ticks subtracted from the election timeout to form the leader lease, covering clock-rate
   * drift between nodes and message delay. See docs/ARCHITECTURE.md "Leader lease".
   * @default ceil(electionTimeoutTicks / 5)
   */
  leaseSafetyTicks?: number;
  /** Bytes of entries in one append message (at least one entry is always sent). @default 1 MiB */
  maxMsgBytes?: number;
  /** Append messages in flight per follower before pausing. @default 256 */
  maxInflightMsgs?: number;
  /** Entry bytes in flight per follower before pausing; 0 = no byte bound. @default 8 MiB */
  maxInflightBytes?: number;
  /** Uncommitted entry bytes a leader accepts before refusing proposals. @default 64 MiB */
  maxUncommittedBytes?: number;
  /** Largest single proposal payload. @default 1 MiB */
  maxEntryBytes?: number;
  /** Committed entry bytes handed out in one Ready (at least one entry). @default 16 MiB */
  maxCommittedBytesPerReady?: number;
  /** Pending ReadIndex requests per leader before refusing more. @default 10_000 */
  maxPendingReads?: number;
  /** Run a pre-vote round before a real election. @default true */
  preVote?: boolean;
  /** Leader steps down without quorum contact; followers in contact ignore votes. @default true */
  checkQuorum?: boolean;
  /** 'safe' confirms each ReadIndex with a heartbeat round; 'lease' trusts the lease. @default 'safe' */
  readOnly?: 'safe' | 'lease';
  /**
   * A leader whose group saw no activity for this many ticks, with every member caught up,
   * quiesces it: heartbeats give way to a beacon every 3 election timeouts, and followers wait
   * 3 beacons before they campaign. Idle groups then cost almost nothing, at the price of a
   * slower failover while idle (any activity wakes the group first). 0 turns it off. @default 0
   */
  quiesceAfterTicks?: number;
}

export interface CompiledRaftConfig {
  readonly electionTimeoutTicks: number;
  readonly electionJitterTicks: number;
  readonly heartbeatTicks: number;
  readonly leaseSafetyTicks: number;
  readonly maxMsgBytes: number;
  readonly maxInflightMsgs: number;
  readonly maxInflightBytes: number;
  readonly maxUncommittedBytes: number;
  readonly maxEntryBytes: number;
  readonly maxCommittedBytesPerReady: number;
  readonly maxPendingReads: number;
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  readonly readOnly: 'safe' | 'lease';
  readonly quiesceAfterTicks: number;
}

const MiB = 1024 * 1024;

export function compileRaftOptions(options: RaftOptions = {}): CompiledRaftConfig {
  const violations: FieldViolation[] = [];
  const positiveInt = (field: keyof RaftOptions, value: number, min = 1): number => {
    if (!Number.isSafeInteger(value) || value < min) {
      violations.push({ field, reason: `must be an integer >= ${min}, got ${value}` });
    }
    return value;
  };
  const electionTimeoutTicks = positiveInt(
    'electionTimeoutTicks',
    options.electionTimeoutTicks ?? 10,
  );
  const heartbeatTicks = positiveInt('heartbeatTicks', options.heartbeatTicks ?? 1);
  // Cross-field rules only make sense once the election timeout itself is valid.
  const electionValid = Number.isSafeInteger(electionTimeoutTicks) && electionTimeoutTicks >= 1;
  if (electionValid && heartbeatTicks >= electionTimeoutTicks) {
    violations.push({
      field: 'heartbeatTicks',
      reason: `must be less than electionTimeoutTicks (${electionTimeoutTicks})`,
    });
  }
  const leaseSafetyTicks = positiveInt(
    'leaseSafetyTicks',
    options.leaseSafetyTicks ??
      (electionTimeoutTicks >= 1 ? Math.ceil(electionTimeoutTicks / 5) : 0),
    0,
  );
  if (electionValid && leaseSafetyTicks >= electionTimeoutTicks) {
    violations.push({
      field: 'leaseSafetyTicks',
      reason: `must be less than electionTimeoutTicks (${electionTimeoutTicks})`,
    });
  }
  const readOnly = options.readOnly ?? 'safe';
  const checkQuorum = options.checkQuorum ?? true;
  if (readOnly === 'lease' && !checkQuorum) {
    violations.push({ field: 'readOnly', reason: "'lease' requires checkQuorum" });
  }
  const config: CompiledRaftConfig = {
    electionTimeoutTicks,
    electionJitterTicks: positiveInt(
      'electionJitterTicks',
      options.electionJitterTicks ?? electionTimeoutTicks,
    ),
    heartbeatTicks,
    leaseSafetyTicks,
    maxMsgBytes: positiveInt('maxMsgBytes', options.maxMsgBytes ?? MiB),
    maxInflightMsgs: positiveInt('maxInflightMsgs', options.maxInflightMsgs ?? 256),
    maxInflightBytes: positiveInt('maxInflightBytes', options.maxInflightBytes ?? 8 * MiB, 0),
    maxUncommittedBytes: positiveInt(
      'maxUncommittedBytes',
      options.maxUncommittedBytes ?? 64 * MiB,
    ),
    maxEntryBytes: positiveInt('maxEntryBytes', options.maxEntryBytes ?? MiB),
    maxCommittedBytesPerReady: positiveInt(
      'maxCommittedBytesPerReady',
      options.maxCommittedBytesPerReady ?? 16 * MiB,
    ),
    maxPendingReads: positiveInt('maxPendingReads', options.maxPendingReads ?? 10_000),
    preVote: options.preVote ?? true,
    checkQuorum,
    readOnly,
    quiesceAfterTicks: positiveInt('quiesceAfterTicks', options.quiesceAfterTicks ?? 0, 0),
  };
  if (violations.length > 0) throw new ValidationError('RAFT_INVALID_CONFIG', violations);
  return Object.freeze(config);
}
