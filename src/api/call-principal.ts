/**
 * The principal the guard (auth-guard.ts) authenticated for a call, kept beside the call object
 * rather than on it: handlers read it through contextOf (router.ts).
 */
import type { Principal } from '../auth/principal.js';

const principals = new WeakMap<object, Principal>();

export function bindPrincipal(call: object, p: Principal): void {
  principals.set(call, p);
}

export function principalOf(call: object): Principal | undefined {
  return principals.get(call);
}
