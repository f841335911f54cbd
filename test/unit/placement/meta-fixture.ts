// A meta state machine for the placement tests: `run` applies one command as the next log entry.
import {
  encodeMetaCommand,
  MetaStateMachine,
  type MetaCommand,
} from '../../../src/placement/meta-state.js';

export interface MetaFixture {
  readonly sm: MetaStateMachine;
  readonly run: (c: MetaCommand) => unknown;
}

/**
 * Members n1…n`nodes` (peer port 710i, API port 700i) and two groups on n1-n3: [0, 100) and
 * [100, `secondEnd`).
 */
export function metaCluster(nodes: number, secondEnd: number): MetaFixture {
  const sm = new MetaStateMachine();
  let index = 0;
  const run = (c: MetaCommand): unknown =>
    sm.apply({ index: ++index, term: 1, type: 'normal', data: encodeMetaCommand(c) });
  run({
    op: 'init',
    members: Array.from({ length: nodes }, (_, i) => ({
      id: `n${i + 1}`,
      peerAddress: `127.0.0.1:710${i + 1}`,
      apiAddress: `127.0.0.1:700${i + 1}`,
    })),
    groups: [
      { id: 1, start: 0, end: 100, replicas: ['n1', 'n2', 'n3'] },
      { id: 2, start: 100, end: secondEnd, replicas: ['n1', 'n2', 'n3'] },
    ],
  });
  return { sm, run };
}
