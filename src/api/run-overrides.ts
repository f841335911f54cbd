/**
 * What a TriggerJob or BackfillJob asks its runs to send instead of the job's own: a payload
 * and extra headers (model.ts RunOverrides). Checked against the job by the same rules as the
 * job's own definition (the merged headers must be what a job could hold), on the leader that
 * proposes the runs, so that a run is never stored with a request delivery would refuse to build.
 */
import { ValidationError, type FieldViolation } from '../base/errors.js';
import { validateWebhookJob } from '../delivery/webhook.js';
import type { TargetPolicy } from '../delivery/target-policy.js';
import { jobForRun, type Job, type RunOverrides } from '../scheduler/model.js';
import { PAYLOAD_BYTES_MAX } from './job-spec.js';
import type { Msg } from './convert.js';

/**
 * The overrides of a request (`payloadJson`, `headers`), or undefined when it asks for none.
 * Violations name the request's own fields (`payloadJson`, `headers.<name>`).
 */
export function runOverridesIn(
  req: Msg,
  job: Job,
  targetPolicy?: TargetPolicy,
): RunOverrides | undefined {
  const violations: FieldViolation[] = [];
  const payloadIn = req['payloadJson'];
  let payload: string | undefined;
  if (payloadIn !== undefined && payloadIn !== null) {
    if (typeof payloadIn !== 'string')
      violations.push({ field: 'payloadJson', reason: 'must be a string of JSON' });
    else {
      payload = payloadIn;
      if (Buffer.byteLength(payload, 'utf8') > PAYLOAD_BYTES_MAX)
        violations.push({
          field: 'payloadJson',
          reason: `must be at most ${PAYLOAD_BYTES_MAX} bytes of UTF-8`,
        });
      else if (!isJson(payload))
        violations.push({ field: 'payloadJson', reason: 'must be JSON text' });
    }
  }
  const headersIn = req['headers'];
  let headers: Record<string, string> | undefined;
  if (headersIn !== undefined && headersIn !== null) {
    if (typeof headersIn !== 'object' || Array.isArray(headersIn))
      violations.push({ field: 'headers', reason: 'must be a map of header name to value' });
    else if (Object.keys(headersIn).length > 0) {
      headers = {};
      for (const [k, v] of Object.entries(headersIn as Record<string, unknown>)) {
        if (typeof v === 'string') headers[k] = v;
        else violations.push({ field: `headers.${k}`, reason: 'must be a string' });
      }
    }
  }
  const overrides: RunOverrides | undefined =
    payload === undefined && headers === undefined
      ? undefined
      : {
          ...(payload !== undefined && { payload }),
          ...(headers !== undefined && { headers }),
        };
  if (overrides !== undefined && violations.length === 0) {
    // The job as this run would send it must pass the job's own rules (reserved names, value
    // characters, the header count, a worker target taking none); their field names are the
    // job's, so they are renamed to the request's.
    for (const v of validateWebhookJob(jobForRun(job, { overrides }), '', targetPolicy)) {
      if (v.field === 'target.headers' || v.field.startsWith('target.headers.'))
        violations.push({ field: v.field.slice('target.'.length), reason: v.reason });
      else if (v.field === 'payload' && payload !== undefined)
        violations.push({ field: 'payloadJson', reason: v.reason });
    }
  }
  if (violations.length > 0) throw new ValidationError('REQUEST_INVALID', violations);
  return overrides;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
