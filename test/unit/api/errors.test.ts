// Error mapping (src/api/status-map.ts) and the google.rpc.Status codec (src/api/rpc-status.ts).
// Method: every stable code maps to its documented gRPC status; violations come back, named in
// the API's snake_case paths, from the `grpc-status-details-bin` bytes as any rich-error client
// would decode them; unknown errors become INTERNAL without their message.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { TickraftError, ValidationError } from '../../../src/base/errors.js';
import { NotLeaderError } from '../../../src/raft/errors.js';
import { ApiCallError } from '../../../src/api/client.js';
import { decodeRpcStatus, encodeRpcStatus } from '../../../src/api/rpc-status.js';
import {
  apiFieldPath,
  GroupUnavailableError,
  toServiceError,
} from '../../../src/api/status-map.js';

t.test('stable codes map to gRPC statuses', (t) => {
  const cases: [string, grpc.status][] = [
    ['JOB_NOT_FOUND', grpc.status.NOT_FOUND],
    ['RUN_NOT_FOUND', grpc.status.NOT_FOUND],
    ['TENANT_NOT_FOUND', grpc.status.NOT_FOUND],
    ['JOB_ALREADY_EXISTS', grpc.status.ALREADY_EXISTS],
    ['TENANT_ALREADY_EXISTS', grpc.status.ALREADY_EXISTS],
    ['JOB_VERSION_CONFLICT', grpc.status.ABORTED],
    ['TENANT_CONFLICT', grpc.status.ABORTED],
    ['RUN_WRONG_STATE', grpc.status.FAILED_PRECONDITION],
    ['DEADLINE_EXCEEDED', grpc.status.DEADLINE_EXCEEDED],
    ['RAFT_PROPOSAL_DROPPED', grpc.status.UNAVAILABLE],
  ];
  for (const [code, status] of cases) {
    const { error } = toServiceError(new TickraftError(code, 'x'));
    t.equal(error.code, status, code);
    t.same(error.metadata.get('tickraft-error-code'), [code]);
  }
  t.end();
});

t.test('INVALID_ARGUMENT carries BadRequest naming every field in snake_case', (t) => {
  const err = new ValidationError('JOB_SPEC_INVALID', [
    { field: 'jobId', reason: 'bad id' },
    { field: 'jobs[3].spec.retry.maxAttempts', reason: 'too many' },
    { field: 'spec.target.headers.X-Trace-Id', reason: 'reserved' },
    { field: 'spec.payload', reason: 'not JSON' },
  ]);
  const { error } = toServiceError(err);
  t.equal(error.code, grpc.status.INVALID_ARGUMENT);
  const decoded = ApiCallError.from(error);
  t.same(
    decoded.violations.map((v) => v.field),
    [
      'job_id',
      'jobs[3].spec.retry.max_attempts',
      'spec.target.headers.X-Trace-Id',
      'spec.payload_json',
    ],
  );
  t.equal(decoded.violations[1]?.reason, 'too many');
  t.equal(decoded.code, 'JOB_SPEC_INVALID');
  t.end();
});

t.test('no leader: UNAVAILABLE with a retry hint and the leader hint when known', (t) => {
  const a = ApiCallError.from(
    toServiceError(new GroupUnavailableError(3, 'no leader known')).error,
  );
  t.equal(a.status, grpc.status.UNAVAILABLE);
  t.ok((a.retryDelayMs ?? 0) > 0, 'RetryInfo present');
  const b = ApiCallError.from(toServiceError(new NotLeaderError(2, 'n3')).error);
  t.equal(b.leaderHint, 'n3');
  t.end();
});

t.test('unknown errors are INTERNAL with a correlation id and no message leak', (t) => {
  const m = toServiceError(new Error('secret stack detail'));
  t.equal(m.error.code, grpc.status.INTERNAL);
  t.ok(m.correlationId);
  t.notMatch(m.error.message, /secret/);
  t.match(m.error.message, m.correlationId!);
  t.end();
});

t.test('the Status codec round-trips, including long strings and large delays', (t) => {
  const long = 'é'.repeat(300);
  const buf = encodeRpcStatus({
    code: 3,
    message: long,
    violations: [{ field: 'a', reason: long }],
    retryDelayMs: 123_456,
  });
  const s = decodeRpcStatus(buf);
  t.equal(s.code, 3);
  t.equal(s.message, long);
  t.same(s.violations, [{ field: 'a', reason: long }]);
  t.equal(s.retryDelayMs, 123_456);
  t.throws(() => decodeRpcStatus(buf.subarray(0, buf.length - 3)));
  t.end();
});

t.test('field paths', (t) => {
  t.equal(apiFieldPath('spec.misfire.catchUpWindowMs'), 'spec.misfire.catch_up_window_ms');
  t.equal(apiFieldPath('pageToken'), 'page_token');
  t.end();
});
