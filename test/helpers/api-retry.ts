/**
 * What a careful client of the public API does with UNAVAILABLE: the cluster says a leader is
 * changing (or the outcome of a write is unknown) and gives a retry hint, so the call is made
 * again after that pause, until `withinMs` has passed. Any other error is the answer.
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import { ApiCallError } from '../../src/api/client.js';
import { sleep } from './cluster.js';

export async function retryUnavailable<T>(
  call: () => Promise<T>,
  withinMs = 30_000,
  onWait?: (pauseMs: number) => void,
): Promise<T> {
  for (const deadline = Date.now() + withinMs; ;) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof ApiCallError) || err.status !== grpcStatus.UNAVAILABLE) throw err;
      if (Date.now() > deadline) throw err;
      const pause = err.retryDelayMs ?? 500;
      onWait?.(pause);
      await sleep(pause);
    }
  }
}

/** The ApiCallError a call ends with; a call that succeeds, or fails otherwise, fails the test. */
export async function refusal(p: Promise<unknown>): Promise<ApiCallError> {
  const err = await p.then(
    () => new Error('the call succeeded'),
    (e: unknown) => e,
  );
  if (!(err instanceof ApiCallError)) throw err instanceof Error ? err : new Error(String(err));
  return err;
}
