// How a node that hosts no replica of a group finds its leader (src/api/replica-walk.ts).
// Found by the chaos suite (membership nemesis, seed 404): a move's new replica won the group's
// leadership in the joint phase; the recorded replicas all answered "not the leader; leader is
// n1", nobody asked n1, and the move driver on the meta leader (which hosted no replica) could
// never take the next step, so the move and every call for the group through such a node hung.
import t from 'tap';
import { askReplicasInTurn, type ReplicaWalk } from '../../../src/api/replica-walk.js';

class NotLeader extends Error {
  constructor(readonly hint: string) {
    super(`not the leader; leader is ${hint}`);
  }
}
class Refused extends Error {}

/** A cluster where `leader` serves and every other node answers with `hints[node]`. */
function walkOf(leader: string, hints: Record<string, string> = {}) {
  const asked: string[] = [];
  const walk: ReplicaWalk<string> = {
    ask: (id) => {
      asked.push(id);
      if (id === leader) return Promise.resolve(`served by ${id}`);
      return Promise.reject(id in hints ? new NotLeader(hints[id]!) : new Refused(id));
    },
    retryable: (err) => err instanceof NotLeader || err instanceof Refused,
    leaderHintOf: (err) => (err instanceof NotLeader ? err.hint : undefined),
  };
  return { walk, asked };
}

t.test('a hint to a node the list does not name is followed', async (t) => {
  const { walk, asked } = walkOf('n1', { n5: 'n1', n3: 'n1', n2: 'n1' });
  t.equal(await askReplicasInTurn(['n5', 'n3', 'n2'], walk, new Error('none')), 'served by n1');
  t.same(asked, ['n5', 'n1'], 'the first hint goes straight to the leader');
});

t.test('the list is walked in order when nobody knows the leader', async (t) => {
  const { walk, asked } = walkOf('n4');
  t.equal(await askReplicasInTurn(['n1', 'n2', 'n4'], walk, new Error('none')), 'served by n4');
  t.same(asked, ['n1', 'n2', 'n4']);
});

t.test('each node is asked once, even when hints point at each other', async (t) => {
  const { walk, asked } = walkOf('nowhere', { n1: 'n2', n2: 'n1', n3: 'n1' });
  await t.rejects(askReplicasInTurn(['n1', 'n2', 'n3'], walk, new Error('none')), {
    message: 'not the leader; leader is n1',
  });
  t.same(asked, ['n1', 'n2', 'n3']);
});

t.test('an error no other node can help with stops the walk', async (t) => {
  const walk: ReplicaWalk<string> = {
    ask: () => Promise.reject(new Error('invalid request')),
    retryable: () => false,
    leaderHintOf: () => undefined,
  };
  await t.rejects(askReplicasInTurn(['n1', 'n2'], walk, new Error('none')), {
    message: 'invalid request',
  });
});

t.test('no candidate at all: the error given', async (t) => {
  const { walk } = walkOf('n1');
  await t.rejects(askReplicasInTurn([], walk, new Error('no leader known')), {
    message: 'no leader known',
  });
});
