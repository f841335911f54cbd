/**
 * `tickctl jobs graph`: a tenant's job dependencies (depends_on) as a table in dependency order,
 * each job with its upstreams and its last run, so an operator sees where a DAG stopped. Only
 * jobs that depend on others or that others depend on are shown.
 */
import type { Command } from 'commander';
import type { CliRun } from '../io.js';
import {
  enumText,
  iso,
  printJson,
  remote,
  table,
  tenantOf,
  tenantOption,
  text,
  withClient,
  type RemoteOptions,
} from '../remote.js';

type Obj = Record<string, unknown>;

export function registerJobGraphCommand(jobs: Command, run: CliRun): void {
  remote(tenantOption(jobs.command('graph'), 'tenant whose job dependencies to show'))
    .description("a tenant's jobs linked by depends_on, upstreams first, each with its last run")
    .action(async (o: RemoteOptions & { tenant?: string }) =>
      withClient(run, o, async (c) => {
        const tenant = tenantOf(o);
        const upstreamsOf = new Map<string, string[]>();
        let token = '';
        do {
          const res = await c.call<Obj>('JobService', 'ListJobs', {
            tenant,
            pageSize: 1000,
            pageToken: token,
          });
          for (const j of res['jobs'] as Obj[]) {
            const deps =
              ((j['spec'] as Obj | undefined)?.['dependsOn'] as string[] | undefined) ?? [];
            upstreamsOf.set(text(j['id']), deps);
          }
          token = text(res['nextPageToken'] ?? '');
        } while (token !== '');
        const inGraph = new Set<string>();
        for (const [id, deps] of upstreamsOf)
          if (deps.length > 0) {
            inGraph.add(id);
            for (const d of deps) inGraph.add(d);
          }
        const ordered = dependencyOrder([...inGraph].sort(), (id) => upstreamsOf.get(id) ?? []);
        const rows: Obj[] = [];
        for (const id of ordered) {
          const res = await c.call<Obj>('RunService', 'ListRuns', {
            tenant,
            jobId: id,
            pageSize: 1,
          });
          const last = (res['runs'] as Obj[] | undefined)?.[0];
          rows.push({ jobId: id, dependsOn: upstreamsOf.get(id) ?? [], lastRun: last ?? null });
        }
        if (o.json === true) return printJson(run, { jobs: rows });
        if (rows.length === 0) {
          run.io.writeOut(`tenant ${tenant} has no jobs with depends_on\n`);
          return;
        }
        table(
          run,
          ['JOB', 'DEPENDS ON', 'LAST SLOT', 'STATUS', 'REASON'],
          rows.map((r) => {
            const last = r['lastRun'] as Obj | null;
            return [
              text(r['jobId']),
              (r['dependsOn'] as string[]).join(', ') || '-',
              last === null ? '-' : iso(last['slotMs']),
              last === null ? '-' : enumText(last['status'], 'RUN_STATUS_'),
              last === null ? '' : text(last['reason'] ?? ''),
            ];
          }),
        );
      }),
    );
}

/**
 * `ids` with every job after its upstreams (depth first, in the given order otherwise); a cycle
 * (two racing updates can make one) does not loop: a job met again while being placed is left
 * where it was first met.
 */
export function dependencyOrder(
  ids: readonly string[],
  upstreamsOf: (id: string) => readonly string[],
): string[] {
  const out: string[] = [];
  const placed = new Set<string>();
  const visiting = new Set<string>();
  const visit = (id: string): void => {
    if (placed.has(id) || visiting.has(id)) return;
    visiting.add(id);
    for (const up of upstreamsOf(id)) if (ids.includes(up)) visit(up);
    visiting.delete(id);
    placed.add(id);
    out.push(id);
  };
  for (const id of ids) visit(id);
  return out;
}
