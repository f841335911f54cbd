/**
 * RunService.WatchRuns: a job's runs as they change, served by the job's group leader (only it
 * knows which at-least-once runs are in flight: run-view.ts). The stream opens with every run
 * the job has (INITIAL, oldest slot first), then sends a run again (CHANGED) each time what it
 * shows changes: its status, its attempts, an attempt's outcome or its deadline; REMOVED when it
 * is dropped. A node that does not lead the group relays the leader's stream. When the leader
 * stops leading, the stream ends with UNAVAILABLE (GROUP_NO_LEADER or RAFT_NOT_LEADER): the
 * watcher calls again, and the new leader's INITIAL messages bring it up to date.
 */
import * as grpc from '@grpc/grpc-js';
import { NotLeaderError } from '../raft/errors.js';
import type { Run } from '../scheduler/model.js';
import { viewStatus } from '../scheduler/run-view.js';
import type { ApiContext } from './api-context.js';
import { runOut, type Msg } from './convert.js';
import { contextOf, type CallContext } from './router.js';
import { jobNotFound } from './scheduler-admin.js';
import { str } from './service-kit.js';
import { GroupUnavailableError, toServiceError } from './status-map.js';
import { resolveJobKey } from './tenant-scope.js';

/** How often a watch checks that this node still leads the job's group. */
const LEADERSHIP_CHECK_MS = 250;

type WatchCall = grpc.ServerWritableStream<Msg, Msg>;

export function watchRunsHandler(api: ApiContext): grpc.handleServerStreamingCall<Msg, Msg> {
  return (call: WatchCall) => {
    let ctx: CallContext;
    let key: string;
    let request: Msg;
    try {
      ctx = contextOf(call);
      const scoped = resolveJobKey(ctx, str(call.request, 'tenant'), str(call.request, 'jobId'));
      key = scoped.key;
      request = { ...call.request, tenant: scoped.tenant };
    } catch (err) {
      call.emit('error', toServiceError(err).error);
      return;
    }
    const groupId = api.admin.groupOf(key);
    const g = api.node.host.groups.get(groupId);
    if (g?.isLeader === true) {
      serveLocally(api, call, groupId, key).catch((err: unknown) =>
        call.emit('error', toServiceError(err).error),
      );
      return;
    }
    if (ctx.forwarded) {
      call.emit('error', toServiceError(new NotLeaderError(groupId, g?.leaderId ?? '')).error);
      return;
    }
    const address = api.router.leaderAddress(groupId);
    if (address === '') {
      const err = new GroupUnavailableError(groupId, 'no leader known; watch again');
      call.emit('error', toServiceError(err).error);
      return;
    }
    relay(api, call, address, request, ctx, groupId);
  };
}

/** What a watcher is shown of a run: a change of it is worth a message. */
function signatureOf(run: Run, inFlight: boolean): string {
  const last = run.attempts[run.attempts.length - 1];
  return `${viewStatus(run, inFlight)}|${run.attempts.length}|${last?.outcome ?? ''}|${run.completeByMs ?? ''}|${run.dueAtMs}`;
}

async function serveLocally(
  api: ApiContext,
  call: WatchCall,
  groupId: number,
  key: string,
): Promise<void> {
  const sm = await api.admin.readJobGroup(key);
  if (!sm.jobs.has(key) && sm.runsOf(key).length === 0) throw jobNotFound(key);
  // The response headers go now, not with the first run: a watcher of a job with no runs yet
  // learns that the watch is set up (the HTTP API answers 200 on them, src/http).
  call.sendMetadata(new grpc.Metadata());
  const shown = new Map<string, string>();
  const send = (kind: string, run: Run, inFlight: boolean): void => {
    call.write({ kind, run: runOut(run, inFlight), atMs: Date.now() });
  };
  const look = (fireId: string, kind: 'INITIAL' | 'CHANGED'): void => {
    const run = sm.runs.get(fireId);
    if (run === undefined) {
      if (!shown.delete(fireId)) return;
      call.write({ kind: 'REMOVED', run: { fireId }, atMs: Date.now() });
      return;
    }
    const inFlight = api.admin.isInFlight(fireId);
    const sig = signatureOf(run, inFlight);
    if (shown.get(fireId) === sig) return;
    shown.set(fireId, sig);
    send(kind, run, inFlight);
  };
  const stop = api.node.scheduler.watchRuns(groupId, key, (fireId) => look(fireId, 'CHANGED'));
  for (const run of [...sm.runsOf(key)].sort((a, b) => a.slotMs - b.slotMs))
    look(run.fireId, 'INITIAL');
  const timer = setInterval(() => {
    if (api.node.host.groups.get(groupId)?.isLeader === true) return;
    end();
    const leader = api.node.host.groups.get(groupId)?.leaderId ?? '';
    call.emit('error', toServiceError(new NotLeaderError(groupId, leader)).error);
  }, LEADERSHIP_CHECK_MS);
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    stop();
    clearInterval(timer);
  };
  call.on('cancelled', end);
  call.on('close', end);
  call.on('error', end);
}

/** Relays the leader's stream to this call, and this call's cancellation to the leader's. */
function relay(
  api: ApiContext,
  call: WatchCall,
  address: string,
  request: Msg,
  ctx: CallContext,
  groupId: number,
): void {
  const upstream = api.router.forwardServerStream(
    address,
    api.method('RunService', 'WatchRuns'),
    request,
    ctx,
    groupId,
  );
  upstream.on('metadata', () => call.sendMetadata(new grpc.Metadata()));
  upstream.on('data', (m: Msg) => call.write(m));
  upstream.on('error', (err: grpc.ServiceError) => {
    if (err.code === grpc.status.CANCELLED) return;
    call.emit('error', err);
  });
  upstream.on('status', (s: grpc.StatusObject) => {
    if (s.code === grpc.status.OK) call.end();
  });
  call.on('cancelled', () => upstream.cancel());
}
