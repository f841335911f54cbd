// compileRaftOptions turns user options into a frozen config. The tests check the documented
// defaults, that each bad value is refused with a ValidationError whose violation names the
// offending field (and only the cross-field rule that was broken), that every violation is
// reported at once, and that edge values the docs allow (0 where permitted) are accepted.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import { compileRaftOptions, type RaftOptions } from '../../../src/raft/config.js';

function violations(options: RaftOptions): { field: string; reason: string }[] {
  try {
    compileRaftOptions(options);
  } catch (e) {
    if (e instanceof ValidationError) return e.violations.map((v) => ({ ...v }));
    throw e;
  }
  return [];
}

t.test('defaults', (t) => {
  const c = compileRaftOptions();
  t.same(c, {
    electionTimeoutTicks: 10,
    electionJitterTicks: 10,
    heartbeatTicks: 1,
    leaseSafetyTicks: 2,
    maxMsgBytes: 1024 * 1024,
    maxInflightMsgs: 256,
    maxInflightBytes: 8 * 1024 * 1024,
    maxUncommittedBytes: 64 * 1024 * 1024,
    maxEntryBytes: 1024 * 1024,
    maxCommittedBytesPerReady: 16 * 1024 * 1024,
    maxPendingReads: 10_000,
    preVote: true,
    checkQuorum: true,
    readOnly: 'safe',
    quiesceAfterTicks: 0,
  });
  t.ok(Object.isFrozen(c), 'the compiled config is frozen');
  t.equal(compileRaftOptions({ electionTimeoutTicks: 23 }).leaseSafetyTicks, 5, 'ceil(23 / 5)');
  t.end();
});

t.test('each bad value is refused, naming its field', (t) => {
  const cases: [string, RaftOptions, string][] = [
    ['zero election timeout', { electionTimeoutTicks: 0 }, 'electionTimeoutTicks'],
    ['negative election timeout', { electionTimeoutTicks: -5 }, 'electionTimeoutTicks'],
    ['fractional election timeout', { electionTimeoutTicks: 10.5 }, 'electionTimeoutTicks'],
    ['NaN election timeout', { electionTimeoutTicks: Number.NaN }, 'electionTimeoutTicks'],
    ['infinite election timeout', { electionTimeoutTicks: Infinity }, 'electionTimeoutTicks'],
    ['zero heartbeat', { heartbeatTicks: 0 }, 'heartbeatTicks'],
    ['heartbeat equal to election timeout', { heartbeatTicks: 10 }, 'heartbeatTicks'],
    [
      'heartbeat above election timeout',
      { electionTimeoutTicks: 5, heartbeatTicks: 6 },
      'heartbeatTicks',
    ],
    ['negative lease safety', { leaseSafetyTicks: -1 }, 'leaseSafetyTicks'],
    ['lease safety equal to election timeout', { leaseSafetyTicks: 10 }, 'leaseSafetyTicks'],
    ['fractional lease safety', { leaseSafetyTicks: 1.5 }, 'leaseSafetyTicks'],
    ['zero maxMsgBytes', { maxMsgBytes: 0 }, 'maxMsgBytes'],
    ['zero maxInflightMsgs', { maxInflightMsgs: 0 }, 'maxInflightMsgs'],
    ['negative maxInflightBytes', { maxInflightBytes: -1 }, 'maxInflightBytes'],
    ['zero maxUncommittedBytes', { maxUncommittedBytes: 0 }, 'maxUncommittedBytes'],
    ['zero maxEntryBytes', { maxEntryBytes: 0 }, 'maxEntryBytes'],
    [
      'zero maxCommittedBytesPerReady',
      { maxCommittedBytesPerReady: 0 },
      'maxCommittedBytesPerReady',
    ],
    ['zero maxPendingReads', { maxPendingReads: 0 }, 'maxPendingReads'],
    ['unsafe-integer maxMsgBytes', { maxMsgBytes: 2 ** 60 }, 'maxMsgBytes'],
    ['lease reads without check-quorum', { readOnly: 'lease', checkQuorum: false }, 'readOnly'],
  ];
  for (const [name, options, field] of cases) {
    t.throws(() => compileRaftOptions(options), ValidationError, `${name}: throws`);
    const v = violations(options);
    if (field === 'electionTimeoutTicks') {
      // Rules that compare other fields with a broken timeout may fire too; the timeout must be
      // among the named fields.
      t.ok(
        v.some((x) => x.field === field),
        `${name}: names ${field}`,
      );
    } else {
      t.same(
        v.map((x) => x.field),
        [field],
        `${name}: exactly one violation, on ${field}`,
      );
    }
    t.ok(
      v.every((x) => x.reason.length > 0),
      `${name}: the reason says what rule was broken`,
    );
  }
  t.end();
});

t.test('the error carries a stable code and a readable message', (t) => {
  try {
    compileRaftOptions({ heartbeatTicks: 0 });
    t.fail('should have thrown');
  } catch (e) {
    t.ok(e instanceof ValidationError);
    if (e instanceof ValidationError) {
      t.equal(e.code, 'RAFT_INVALID_CONFIG');
      t.match(e.message, /heartbeatTicks/);
      t.match(e.message, />= 1/);
    }
  }
  t.end();
});

t.test('every violation is reported at once', (t) => {
  const v = violations({ electionTimeoutTicks: 4, heartbeatTicks: 4, maxMsgBytes: 0 });
  t.same(v.map((x) => x.field).sort(), ['heartbeatTicks', 'maxMsgBytes']);
  const w = violations({ maxEntryBytes: -1, maxPendingReads: 0, maxInflightMsgs: 1.25 });
  t.same(w.map((x) => x.field).sort(), ['maxEntryBytes', 'maxInflightMsgs', 'maxPendingReads']);
  t.end();
});

t.test('edge values that are allowed', (t) => {
  t.equal(compileRaftOptions({ leaseSafetyTicks: 0 }).leaseSafetyTicks, 0, 'no safety margin');
  t.equal(compileRaftOptions({ maxInflightBytes: 0 }).maxInflightBytes, 0, 'no byte bound');
  const c = compileRaftOptions({ electionTimeoutTicks: 2, heartbeatTicks: 1 });
  t.equal(c.electionTimeoutTicks, 2, 'smallest timeout above the heartbeat');
  t.equal(c.leaseSafetyTicks, 1, 'default safety stays below the timeout');
  t.equal(compileRaftOptions({ readOnly: 'lease' }).readOnly, 'lease', 'lease with check-quorum');
  const off = compileRaftOptions({ preVote: false, checkQuorum: false });
  t.equal(off.preVote, false);
  t.equal(off.checkQuorum, false);
  t.end();
});
