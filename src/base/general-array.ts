/**
 * An empty array whose elements are already of V8's general kind. A literal `[]` starts as an
 * array of small integers, and V8 optimizes a store or push with the feedback it has seen: when
 * the only stores before optimization went into empty arrays (each changing the array's element
 * kind), the first store into an array that already changed kind does not match and deoptimizes
 * the code, and everything it was inlined into. Long-lived arrays on hot paths (the job table's
 * chunk lists and ids) start this way so that every store sees the same kind.
 */
export function generalArray<T>(): T[] {
  const list = [undefined as T];
  list.pop();
  return list;
}
