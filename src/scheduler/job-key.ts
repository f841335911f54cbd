/**
 * Job ids are unique per tenant (docs/API.md, "Job ids are per tenant"): two tenants may both have
 * `nightly-report`. Inside the cluster a job is named by its key, `<tenant>/<job id>`, and
 * everything replicated uses the key as the job's id: the job table, runs and their fire ids
 * (`<tenant>/<job id>:<slot ms>`), the ring hash that places the job in a group. The pure core
 * never needs to know there is a tenant in it; the API turns a caller's (tenant, job id) into the
 * key and strips it back to the job id in every answer.
 *
 * Neither a tenant id (TENANT_ID_PATTERN) nor a job id (JOB_ID_PATTERN, src/api/job-spec.ts) may
 * hold '/' or ':', so a key splits at its only '/' and a fire id at its last ':'.
 */
import { assert } from '../base/assert.js';

export interface JobKeyParts {
  readonly tenant: string;
  readonly jobId: string;
}

/** The key of `jobId` of `tenant`; both must be valid ids (checked by the caller). */
export function jobKeyOf(tenant: string, jobId: string): string {
  assert(
    tenant !== '' && jobId !== '' && !tenant.includes('/') && !jobId.includes('/'),
    `jobKeyOf: ${JSON.stringify(tenant)} / ${JSON.stringify(jobId)} is not a tenant and a job id`,
  );
  return `${tenant}/${jobId}`;
}

/** The tenant and job id of a key made by jobKeyOf. */
export function splitJobKey(key: string): JobKeyParts {
  const at = key.indexOf('/');
  assert(
    at > 0 && at < key.length - 1 && key.indexOf('/', at + 1) < 0,
    `splitJobKey: ${JSON.stringify(key)} is not <tenant>/<job id>`,
  );
  return { tenant: key.slice(0, at), jobId: key.slice(at + 1) };
}

/** The job id a caller knows, of a key made by jobKeyOf. */
export function jobIdOfKey(key: string): string {
  return splitJobKey(key).jobId;
}

/**
 * The tenant, job id and slot of a fire id `<tenant>/<job id>:<slot ms>`, or undefined when it is
 * not one (for input from a caller: this never throws).
 */
export function parseFireId(fireId: string):
  | {
      readonly key: string;
      readonly tenant: string;
      readonly jobId: string;
      readonly slotMs: number;
    }
  | undefined {
  const colon = fireId.lastIndexOf(':');
  const slash = fireId.indexOf('/');
  if (slash <= 0 || colon <= slash + 1 || fireId.indexOf('/', slash + 1) >= 0) return undefined;
  const slot = fireId.slice(colon + 1);
  if (!/^\d{1,16}$/.test(slot)) return undefined;
  const slotMs = Number(slot);
  if (!Number.isSafeInteger(slotMs)) return undefined;
  const key = fireId.slice(0, colon);
  return { key, tenant: key.slice(0, slash), jobId: key.slice(slash + 1), slotMs };
}

/**
 * `reason` with every job key it names (`job <tenant>/<id>`, as the state machine words its
 * refusals) written as the caller knows the job, `job "<id>"`: answers name no key.
 */
export function publicReason(reason: string): string {
  return reason.replace(
    /\bjob ([a-z0-9][a-z0-9_-]*)\/([A-Za-z0-9][A-Za-z0-9_.-]*)(?![A-Za-z0-9_.:/-])/g,
    (_all, _tenant: string, jobId: string) => `job ${JSON.stringify(jobId)}`,
  );
}
