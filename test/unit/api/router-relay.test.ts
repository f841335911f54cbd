// What a caller is told when the router's forward to a group's leader failed: a leader's node
// that did not answer must not read as "your request never left" (an earlier forward may have
// been applied), while an answer the leader gave passes through as it came.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { asRelayed, codeOf } from '../../../src/api/router.js';

function serviceError(
  code: grpc.status,
  details: string,
  tickraftCode?: string,
): grpc.ServiceError {
  const metadata = new grpc.Metadata();
  if (tickraftCode !== undefined) metadata.set('tickraft-error-code', tickraftCode);
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata });
}

t.test('a refused connection to the leader becomes GROUP_NO_LEADER', (t) => {
  const refused = serviceError(
    grpc.status.UNAVAILABLE,
    'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.2:7001',
  );
  const told = asRelayed(refused, 4);
  t.equal(codeOf(told), 'GROUP_NO_LEADER');
  t.notMatch((told as Error).message, /No connection established|ECONNREFUSED/);
  t.match((told as Error).message, /group 4/);
  t.end();
});

t.test("the leader's own answers pass through unchanged", (t) => {
  const notFound = serviceError(grpc.status.NOT_FOUND, 'job x', 'JOB_NOT_FOUND');
  t.equal(asRelayed(notFound, 4), notFound);
  const noLeader = serviceError(grpc.status.UNAVAILABLE, 'group 4: no leader', 'GROUP_NO_LEADER');
  t.equal(asRelayed(noLeader, 4), noLeader);
  t.end();
});
