/**
 * Fencing tokens (docs/ARCHITECTURE.md, Words): strictly increasing per job across every attempt
 * ever authorised, and any token issued in term T2 above every token of an earlier term T1. The
 * floor of term T is T × 2^24, so one leader may authorise 2^24 attempts per job per term
 * before it would reach the next term's floor (asserted).
 */
import { assert, assertionFailed } from '../base/assert.js';

export const TOKENS_PER_TERM = 2 ** 24;

export function termFloor(term: number): number {
  if (!(Number.isSafeInteger(term) && term >= 1))
    assertionFailed(`term must be a positive integer, got ${term}`);
  return term * TOKENS_PER_TERM;
}

/** The token for a new attempt of a job whose highest token so far is `lastToken`. */
export function nextToken(lastToken: number, term: number): number {
  const floor = termFloor(term);
  const token = Math.max(lastToken + 1, floor);
  if (!(token < floor + TOKENS_PER_TERM))
    assertionFailed(`job exhausted the tokens of term ${term}`);
  assert(Number.isSafeInteger(token), 'fencing token beyond 2^53');
  return token;
}
