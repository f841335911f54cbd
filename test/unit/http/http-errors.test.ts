// Errors reach HTTP clients as an HTTP status (the gRPC code mapped as grpc-gateway maps it) and
// one JSON body carrying what the gRPC API sends in its status details.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { GroupUnavailableError, toServiceError } from '../../../src/api/status-map.js';
import { TickraftError, ValidationError } from '../../../src/base/errors.js';
import {
  ERROR_STATUSES,
  fromLocalError,
  fromServiceError,
  HttpApiError,
  httpStatusOf,
} from '../../../src/http/http-errors.js';

t.test('gRPC codes → HTTP statuses', (t) => {
  const expected: [grpc.status, number][] = [
    [grpc.status.INVALID_ARGUMENT, 400],
    [grpc.status.FAILED_PRECONDITION, 400],
    [grpc.status.OUT_OF_RANGE, 400],
    [grpc.status.UNAUTHENTICATED, 401],
    [grpc.status.PERMISSION_DENIED, 403],
    [grpc.status.NOT_FOUND, 404],
    [grpc.status.ALREADY_EXISTS, 409],
    [grpc.status.ABORTED, 409],
    [grpc.status.RESOURCE_EXHAUSTED, 429],
    [grpc.status.CANCELLED, 499],
    [grpc.status.INTERNAL, 500],
    [grpc.status.UNKNOWN, 500],
    [grpc.status.DATA_LOSS, 500],
    [grpc.status.UNIMPLEMENTED, 501],
    [grpc.status.UNAVAILABLE, 503],
    [grpc.status.DEADLINE_EXCEEDED, 504],
  ];
  for (const [code, http] of expected) t.equal(httpStatusOf(code), http, grpc.status[code]);
  t.same(ERROR_STATUSES, [400, 401, 403, 404, 409, 429, 500, 503, 504]);
  t.end();
});

t.test('the body carries the error code, field violations, retry hint and leader', (t) => {
  const bad = fromServiceError(
    toServiceError(
      new ValidationError('JOB_SPEC_INVALID', [
        { field: 'spec.retry.maxAttempts', reason: 'must be in [1, 100]' },
      ]),
    ).error,
  );
  t.equal(bad.httpStatus, 400);
  t.same(bad.body, {
    code: 3,
    status: 'INVALID_ARGUMENT',
    message: 'spec.retry.max_attempts: must be in [1, 100]',
    details: {
      error_code: 'JOB_SPEC_INVALID',
      field_violations: [{ field: 'spec.retry.max_attempts', description: 'must be in [1, 100]' }],
    },
  });
  const busy = fromServiceError(
    toServiceError(new GroupUnavailableError(3, 'no leader known')).error,
  );
  t.equal(busy.httpStatus, 503);
  t.equal(busy.body.details.error_code, 'GROUP_NO_LEADER');
  t.equal(busy.body.details.retry_delay_ms, 500);
  t.equal(busy.headers['retry-after'], '1');
  const notLeader = new TickraftError('RAFT_NOT_LEADER', 'not the leader', {
    details: { leaderHint: 'n2' },
  });
  t.equal(fromServiceError(toServiceError(notLeader).error).body.details.leader, 'n2');
  const internal = fromServiceError(toServiceError(new Error('boom')).error);
  t.equal(internal.httpStatus, 500);
  t.match(internal.body.details.correlation_id, /^[0-9a-f-]{36}$/);
  const auth = fromServiceError(
    toServiceError(new TickraftError('AUTH_MISSING', 'no credentials')).error,
  );
  t.equal(auth.httpStatus, 401);
  t.equal(auth.headers['www-authenticate'], 'Bearer');
  t.end();
});

t.test("the HTTP layer's own errors take the same shape", (t) => {
  const logged: string[] = [];
  const e405 = fromLocalError(
    new HttpApiError(405, grpc.status.UNIMPLEMENTED, 'HTTP_METHOD_NOT_ALLOWED', 'no', {
      allow: 'POST',
    }),
    (id) => logged.push(id),
  );
  t.equal(e405.httpStatus, 405);
  t.equal(e405.headers['allow'], 'POST');
  t.same(e405.body, {
    code: 12,
    status: 'UNIMPLEMENTED',
    message: 'no',
    details: { error_code: 'HTTP_METHOD_NOT_ALLOWED', field_violations: [] },
  });
  const v = fromLocalError(
    new ValidationError('REQUEST_INVALID', [{ field: 'page_size', reason: 'must be an integer' }]),
    (id) => logged.push(id),
  );
  t.equal(v.httpStatus, 400);
  t.same(v.body.details.field_violations, [
    { field: 'page_size', description: 'must be an integer' },
  ]);
  const bug = fromLocalError(new TypeError('x is undefined'), (id) => logged.push(id));
  t.equal(bug.httpStatus, 500);
  t.same(logged, [bug.body.details.correlation_id], 'only the unexpected one is logged, by its id');
  t.end();
});
