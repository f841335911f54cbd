/**
 * What the state keeps for a long time, made compact:
 * - values many jobs share (tenant, zone, schedule text, URL, payload, the enum strings, the
 *   retry / misfire / overlap / headers objects, and whole job definitions) are interned, one
 *   object per distinct value;
 * - every other string is copied flat. Strings decoded from a log entry may be slices of one
 *   string holding the whole entry (msgpackr extracts them in bulk), so keeping a short slice
 *   would keep the entry's text alive with it.
 * With millions of jobs this is a large share of a replica's heap and of what the collector
 * walks. None of these values is ever mutated, so sharing is safe.
 */
import { specPartKey, type SpecPart } from './commands.js';
import type { Dependencies, JobSpec, OverlapSettings, WebhookTarget } from './model.js';

/** A job's definition without what usually differs from job to job (name, anchor). */
export type SharedSpec = Readonly<Omit<JobSpec, 'name' | 'anchorMs'>>;

/** Distinct values remembered per kind; past the bound, values are copied rather than shared. */
const INTERNED_MAX = 100_000;
/** Payloads longer than this are never interned: the intern table would hold them all. */
const INTERNED_PAYLOAD_CHARS_MAX = 1024;

export class Retained {
  private readonly strings = new Map<string, string>();
  private readonly objects = new Map<string, object>();

  /** A flat copy of `s` (no reference to a larger string). */
  flat(s: string): string {
    // V8 makes a slice of 13 characters or more a view of its parent, so only a string shorter
    // than that can be a slice's own copy. A JSON round trip builds a fresh sequential string:
    // 40 bytes for a 20-character id where the concatenate-and-slice copy kept a 32-byte view
    // and a 40-byte parent, in about the same time (~300 ns).
    return s.length < 13 ? s : (JSON.parse(JSON.stringify(s)) as string);
  }

  /** The one shared copy of a value many jobs repeat (bounded; past the bound, a flat copy). */
  shared(s: string): string {
    const got = this.strings.get(s);
    if (got !== undefined) return got;
    const copy = this.flat(s);
    if (this.strings.size < INTERNED_MAX) this.strings.set(copy, copy);
    return copy;
  }

  optional(s: string | undefined): string | undefined {
    return s === undefined ? undefined : this.flat(s);
  }

  private sharedObject<V extends object>(key: string, make: () => V): V {
    const got = this.objects.get(key) as V | undefined;
    if (got !== undefined) return got;
    const value = Object.freeze(make());
    if (this.objects.size < INTERNED_MAX) this.objects.set(key, value);
    return value;
  }

  /** part key → id; specs[id]: schedule → the SharedSpec. */
  private readonly partIds = new Map<string, number>();
  private readonly specs: Map<string, SharedSpec>[] = [];
  /** By part id: the first SharedSpec made for the part. */
  private readonly firstSpecs: (SharedSpec | undefined)[] = [];
  private specCount = 0;

  /**
   * The interned id of a definition's shared part (everything but name, schedule and anchor),
   * or undefined when it is not interned (a large payload, or the table is full). A create-jobs
   * entry asks once per definition, not once per job.
   */
  partId(part: SpecPart): number | undefined {
    if (part.payload.length > INTERNED_PAYLOAD_CHARS_MAX) return undefined;
    const key = specPartKey(part);
    const got = this.partIds.get(key);
    if (got !== undefined) return got;
    if (this.partIds.size >= INTERNED_MAX) return undefined;
    const id = this.partIds.size;
    this.partIds.set(key, id);
    this.specs.push(new Map());
    return id;
  }

  /**
   * The shared definition of a job: jobs registered in bulk usually differ only in id, name,
   * anchor and schedule, so a million of them hold a few SharedSpecs between them. `partId` is
   * partId(part) (computed once per definition by the caller).
   */
  specOf(part: SpecPart, partId: number | undefined, schedule: string): SharedSpec {
    if (partId === undefined) return Object.freeze(this.make(part, schedule));
    // By the schedule string itself: no key to build per job.
    const bySchedule = this.specs[partId]!;
    const got = bySchedule.get(schedule);
    if (got !== undefined) return got;
    // Another schedule of a known part: its shared values are those of the part's first spec.
    const first = this.firstSpecs[partId];
    const value = Object.freeze(
      first === undefined ? this.make(part, schedule) : withSchedule(first, this.shared(schedule)),
    );
    this.firstSpecs[partId] ??= value;
    if (this.specCount < INTERNED_MAX) {
      bySchedule.set(value.schedule, value);
      this.specCount++;
    }
    return value;
  }

  /** The shared definition of one job's spec. */
  spec(spec: JobSpec): SharedSpec {
    return this.specOf(spec, this.partId(spec), spec.schedule);
  }

  /** Built field by field in one fixed order, so that every SharedSpec has the same hidden class. */
  private make(spec: SpecPart, schedule: string): SharedSpec {
    const r = spec.retry;
    const m = spec.misfire;
    const o = spec.overlap;
    const headers = Object.entries(spec.target.headers);
    const headersKey = headers.length === 0 ? '' : JSON.stringify(headers);
    return {
      tenant: this.shared(spec.tenant),
      schedule: this.shared(schedule),
      timezone: this.shared(spec.timezone),
      target: this.sharedObject(
        `t${spec.target.url}\u0000${headersKey}\u0000${spec.target.completionTimeoutMs ?? ''}`,
        (): WebhookTarget => {
          const url = this.shared(spec.target.url);
          const shared = Object.fromEntries(
            headers.map(([k, v]) => [this.shared(k), this.shared(v)]),
          );
          // Absent stays absent: a target without it is stored as before the field existed.
          const timeout = spec.target.completionTimeoutMs;
          return timeout === undefined
            ? { url, headers: shared }
            : { url, headers: shared, completionTimeoutMs: timeout };
        },
      ),
      payload:
        spec.payload.length <= INTERNED_PAYLOAD_CHARS_MAX
          ? this.shared(spec.payload)
          : this.flat(spec.payload),
      delivery: spec.delivery === 'at_most_once' ? 'at_most_once' : 'at_least_once',
      retry: this.sharedObject(
        `r${r.maxAttempts}/${r.initialBackoffMs}/${r.maxBackoffMs}/${r.multiplier}/${r.maxAgeMs}`,
        () => ({
          maxAttempts: r.maxAttempts,
          initialBackoffMs: r.initialBackoffMs,
          maxBackoffMs: r.maxBackoffMs,
          multiplier: r.multiplier,
          maxAgeMs: r.maxAgeMs,
        }),
      ),
      attemptDeadlineMs: spec.attemptDeadlineMs,
      misfire: this.sharedObject(`m${m.policy}/${m.fireAllCap}/${m.catchUpWindowMs}`, () => ({
        policy: m.policy,
        fireAllCap: m.fireAllCap,
        catchUpWindowMs: m.catchUpWindowMs,
      })),
      // The limit is part of the key: two definitions differing only in it must not share.
      // Absent stays absent (not `undefined`), so a definition without it is stored, and
      // snapshotted, exactly as before the field existed.
      overlap: this.sharedObject(
        `o${o.policy}/${o.bufferCap}/${o.maxConcurrency ?? ''}`,
        (): OverlapSettings =>
          o.maxConcurrency === undefined
            ? { policy: o.policy, bufferCap: o.bufferCap }
            : { policy: o.policy, bufferCap: o.bufferCap, maxConcurrency: o.maxConcurrency },
      ),
      priority: spec.priority,
      startAtMs: spec.startAtMs,
      endAtMs: spec.endAtMs,
      remainingFires: spec.remainingFires,
      dependsOn:
        spec.dependsOn === undefined
          ? undefined
          : this.sharedObject(
              `d${spec.dependsOn.onUpstreamFailure}/${spec.dependsOn.jobs.join('\u0000')}`,
              (): Dependencies => ({
                jobs: spec.dependsOn!.jobs.map((j) => this.shared(j)),
                onUpstreamFailure: spec.dependsOn!.onUpstreamFailure,
              }),
            ),
    };
  }
}

/** `s` with another (interned) schedule, built in make()'s field order (one hidden class). */
function withSchedule(s: SharedSpec, schedule: string): SharedSpec {
  return {
    tenant: s.tenant,
    schedule,
    timezone: s.timezone,
    target: s.target,
    payload: s.payload,
    delivery: s.delivery,
    retry: s.retry,
    attemptDeadlineMs: s.attemptDeadlineMs,
    misfire: s.misfire,
    overlap: s.overlap,
    priority: s.priority,
    startAtMs: s.startAtMs,
    endAtMs: s.endAtMs,
    remainingFires: s.remainingFires,
    dependsOn: s.dependsOn,
  };
}
