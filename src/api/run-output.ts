/**
 * RunService.GetRunOutput and its node-to-node half NodeService.RunOutput (docs/API.md, "Run
 * output"). An attempt's full output is not replicated: it lives in the memory of the node that
 * received it (src/delivery/run-output-store.ts), which the attempt record names (`outputNode`,
 * else `node`). So the call reads the run on its group's leader (GetRun's path, routed there),
 * picks the attempt, and asks that node; when the node is unknown, does not answer or no longer
 * holds the output, it answers with the record's replicated excerpt instead, saying so
 * (`source` "excerpt"). An attempt the leader is making right now has no record yet (an
 * at-least-once attempt is logged with its result): its output is on the leader itself.
 */
import { TickraftError, ValidationError, type FieldViolation } from '../base/errors.js';
import type { RunOutputRead, RunOutputStore } from '../delivery/run-output-store.js';
import type { Attempt, Run } from '../scheduler/model.js';
import type { ApiContext } from './api-context.js';
import type { Msg } from './convert.js';
import type { OnFire } from './run-completion.js';
import type { CallContext } from './router.js';
import { num, str, type Handler } from './service-kit.js';

/** How long the leader waits for the node holding an output before answering the excerpt. */
export const RUN_OUTPUT_ASK_MS = 2000;

export class RunOutputError extends TickraftError {
  override readonly name = 'RunOutputError';
}

/** RunService.GetRunOutput. */
export function getRunOutputHandler(api: ApiContext, onFire: OnFire): Handler {
  return (req, ctx) => {
    const { attempt, offset } = requestIn(req);
    return onFire(ctx, 'GetRunOutput', req, async (fireId) => {
      const run = await api.admin.getRun(fireId);
      return runOutput(api, ctx, run, api.admin.sendingAttempt(fireId), attempt, offset);
    });
  };
}

/** NodeService.RunOutput: the attempt's output as this node holds it. */
export function localRunOutput(store: RunOutputStore, req: Msg): Msg {
  const read = store.read(str(req, 'fireId'), num(req, 'attempt'), num(req, 'offset'));
  if (read === undefined) return { found: false };
  return { found: true, ...readOut(read), complete: read.complete };
}

function requestIn(req: Msg): { attempt: number | undefined; offset: number } {
  const violations: FieldViolation[] = [];
  const attempt = req['attempt'];
  if (
    attempt !== undefined &&
    attempt !== null &&
    !(typeof attempt === 'number' && Number.isSafeInteger(attempt) && attempt >= 0)
  )
    violations.push({ field: 'attempt', reason: 'must be an attempt number (1, 2, …) when given' });
  const offset = req['offset'] ?? 0;
  if (!(typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0))
    violations.push({ field: 'offset', reason: 'must be a byte offset ≥ 0' });
  if (violations.length > 0) throw new ValidationError('REQUEST_INVALID', violations);
  return {
    // 0 is how a client that cannot leave the field out says "the latest".
    attempt: typeof attempt === 'number' && attempt > 0 ? attempt : undefined,
    offset: offset as number,
  };
}

/** On the run's leader: the attempt's output from its node, or the replicated excerpt. */
async function runOutput(
  api: ApiContext,
  ctx: CallContext,
  run: Run,
  sending: number | undefined,
  asked: number | undefined,
  offset: number,
): Promise<Msg> {
  const last = run.attempts[run.attempts.length - 1];
  const n = asked ?? Math.max(sending ?? 0, last?.attempt ?? 0);
  const record = run.attempts.find((a) => a.attempt === n);
  const inFlight = n === sending;
  if (n === 0)
    throw new RunOutputError('RUN_ATTEMPT_NOT_FOUND', `run ${run.fireId} has no attempt yet`);
  if (record === undefined && !inFlight)
    throw new RunOutputError('RUN_ATTEMPT_NOT_FOUND', `run ${run.fireId} has no attempt ${n}`);
  // The attempt goes on: sent, leased or started by this leader, or accepted (202) and awaiting
  // its completion, or an at-most-once attempt whose fate its next leader has not settled yet.
  const ongoing =
    inFlight || (record === last && (run.status === 'RUNNING' || run.status === 'DISPATCHED'));
  const self = api.node.id;
  const holder = inFlight ? self : (record?.outputNode ?? record?.node ?? '');
  const base = { fireId: run.fireId, attempt: n, complete: !ongoing, nodeId: holder };
  const excerpt = (): Msg => ({ ...base, ...excerptFrom(record, offset), source: 'excerpt' });
  const store = api.node.runOutputs;
  if (holder === '' || !store.enabled) return excerpt();
  if (holder === self) {
    const read = store.read(run.fireId, n, offset);
    if (read !== undefined) return { ...base, ...readOut(read), source: 'node' };
    // Nothing kept yet for the attempt in flight here: nothing was said yet.
    if (inFlight)
      return { ...base, output: '', nextOffset: offset, truncated: false, source: 'node' };
    return excerpt();
  }
  const address = api.node.meta.members.get(holder)?.apiAddress ?? '';
  if (address === '') return excerpt();
  const bounded: CallContext = {
    ...ctx,
    deadlineMs: Math.min(ctx.deadlineMs, Date.now() + RUN_OUTPUT_ASK_MS),
  };
  const answer = await api
    .callMember<Msg>(address, 'RunOutput', { fireId: run.fireId, attempt: n, offset }, bounded)
    // A node that is down, cut off or slow: the excerpt is what is left to show.
    .catch(() => undefined);
  if (answer?.['found'] !== true) return excerpt();
  return {
    ...base,
    output: answer['output'] ?? '',
    nextOffset: answer['nextOffset'] ?? offset,
    truncated: answer['truncated'] === true,
    source: 'node',
  };
}

/**
 * A read's text and offsets. Whether the attempt is complete is the replicated record's to say
 * (an attempt whose worker finished is still in flight until its result is logged).
 */
function readOut(read: RunOutputRead): Msg {
  return { output: read.text, nextOffset: read.nextOffset, truncated: read.truncated };
}

/**
 * The attempt record's excerpt from a byte offset, whole characters only. Whether the output
 * was longer than its excerpt is not known here, so it never says truncated.
 */
function excerptFrom(record: Attempt | undefined, offset: number): Msg {
  const bytes = Buffer.from(record?.responseExcerpt ?? '', 'utf8');
  let from = Math.min(offset, bytes.length);
  while (from > 0 && from < bytes.length && (bytes[from]! & 0xc0) === 0x80) from--;
  return {
    output: bytes.toString('utf8', from),
    // Never before the offset asked: a reader that had more from the node does not go back.
    nextOffset: Math.max(offset, bytes.length),
    truncated: false,
  };
}
