/**
 * RunService.CompleteRun and Heartbeat: a webhook receiver that answered 202 finishes the run
 * later, or says it is still at work (docs/workflows.md). The request is checked here (its
 * fencing token, outcome, bounds of what is kept); whether the token names the run's current
 * attempt is decided by the state machine when the entry applies, on every replica alike.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { outputExcerpt } from '../delivery/run-output-store.js';
import type { RunCompletion } from '../scheduler/dispatcher.js';
import {
  COMPLETION_TIMEOUT_MS_MAX,
  COMPLETION_TIMEOUT_MS_MIN,
  type AttemptOutcome,
} from '../scheduler/model.js';
import type { Msg } from './convert.js';
import { runOut } from './convert.js';
import type { CallContext } from './router.js';
import type { SchedulerAdmin } from './scheduler-admin.js';
import { str, type Handler } from './service-kit.js';

/** Runs `local` on the leader of the fire id's group, the fire id checked with its tenant. */
export type OnFire = <T>(
  ctx: CallContext,
  name: string,
  req: Msg,
  local: (fireId: string) => Promise<T>,
  write?: boolean,
) => Promise<T>;

export function completionHandlers(
  onFire: OnFire,
  admin: () => SchedulerAdmin,
): Record<string, Handler> {
  return {
    CompleteRun: (req, ctx) => {
      const { completion, output } = completionIn(req);
      return onFire(
        ctx,
        'CompleteRun',
        req,
        // The node serving the call keeps the output, cut at its own bound.
        async (fireId) => runOut(await admin().completeRun({ ...completion, fireId }, output)),
        true,
      );
    },

    Heartbeat: (req, ctx) => {
      const token = fencingTokenIn(req);
      const extend = req['extendMs'];
      if (
        extend !== undefined &&
        extend !== null &&
        !(
          typeof extend === 'number' &&
          Number.isSafeInteger(extend) &&
          extend >= COMPLETION_TIMEOUT_MS_MIN &&
          extend <= COMPLETION_TIMEOUT_MS_MAX
        )
      )
        throw new ValidationError('REQUEST_INVALID', [
          {
            field: 'extendMs',
            reason: `must be an integer in [${COMPLETION_TIMEOUT_MS_MIN}, ${COMPLETION_TIMEOUT_MS_MAX}] ms`,
          },
        ]);
      return onFire(
        ctx,
        'Heartbeat',
        req,
        async (fireId) =>
          runOut(
            await admin().heartbeatRun(
              fireId,
              token,
              typeof extend === 'number' ? extend : undefined,
            ),
          ),
        true,
      );
    },
  };
}

/**
 * What the attempt record keeps of a completion's error, a bound on replicated state; of its
 * output it keeps the excerpt (outputExcerpt: 1,024 characters), the node serving the call the
 * rest up to its bound (run-output-store.ts).
 */
export const COMPLETION_ERROR_CHARS_MAX = 1024;

const COMPLETION_OUTCOMES: Readonly<Record<string, AttemptOutcome>> = {
  ATTEMPT_OUTCOME_SUCCESS: 'success',
  ATTEMPT_OUTCOME_RETRY: 'retry',
  ATTEMPT_OUTCOME_FAIL: 'fail',
};

function fencingTokenIn(req: Msg): number {
  const token = req['fencingToken'];
  if (typeof token !== 'number' || !Number.isSafeInteger(token) || token <= 0)
    throw new ValidationError('REQUEST_INVALID', [
      {
        field: 'fencingToken',
        reason: 'must be the Tickraft-Fencing-Token of the accepted request (a positive integer)',
      },
    ]);
  return token;
}

/**
 * A CompleteRun request's completion (its fire id is checked with its tenant by onFire), with
 * the output's excerpt, and the output as sent.
 */
function completionIn(req: Msg): {
  completion: Omit<RunCompletion, 'fireId'>;
  output: string | undefined;
} {
  const violations: FieldViolation[] = [];
  let token = 0;
  try {
    token = fencingTokenIn(req);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    violations.push(...err.violations);
  }
  const outcome = COMPLETION_OUTCOMES[String(req['outcome'])];
  if (outcome === undefined)
    violations.push({
      field: 'outcome',
      reason: `must be one of ${Object.keys(COMPLETION_OUTCOMES).join(', ')}`,
    });
  const retryAfter = req['retryAfterMs'];
  if (
    retryAfter !== undefined &&
    retryAfter !== null &&
    !(typeof retryAfter === 'number' && Number.isSafeInteger(retryAfter) && retryAfter >= 0)
  )
    violations.push({ field: 'retryAfterMs', reason: 'must be an integer ≥ 0 when given' });
  else if (retryAfter !== undefined && retryAfter !== null && outcome !== 'retry')
    violations.push({ field: 'retryAfterMs', reason: 'is only for outcome ATTEMPT_OUTCOME_RETRY' });
  if (violations.length > 0 || outcome === undefined)
    throw new ValidationError('REQUEST_INVALID', violations);
  const error = str(req, 'error');
  const output = str(req, 'output');
  return {
    completion: {
      token,
      outcome,
      error: error === '' ? undefined : error.slice(0, COMPLETION_ERROR_CHARS_MAX),
      output: output === '' ? undefined : outputExcerpt(output),
      retryAfterMs: typeof retryAfter === 'number' ? retryAfter : undefined,
    },
    output: output === '' ? undefined : output,
  };
}
