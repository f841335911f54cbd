/**
 * The stable 32-bit hash that places a shard key on the ring: FNV-1a over the key's UTF-8
 * bytes. It must never change once a cluster holds data (moving a key between groups is a
 * rebalance, not a rehash), so it is written out here rather than taken from a library.
 */
const encoder = new TextEncoder();

export function hashShardKey(key: string): number {
  let h = 0x811c9dc5;
  for (const byte of encoder.encode(key)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
