/**
 * The stable 32-bit hash that places a shard key on the ring: FNV-1a over the key's UTF-8
 * bytes. It must never change once a cluster holds data (moving a key between groups is a
 * rebalance, not a rehash), so it is written out here rather than taken from a library.
 *
 * The UTF-8 bytes are produced on the fly, exactly as TextEncoder would (a lone surrogate
 * becomes U+FFFD), so hashing a key allocates nothing.
 */
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

function step(h: number, byte: number): number {
  return Math.imul(h ^ byte, FNV_PRIME);
}

export function hashShardKey(key: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < key.length; i++) {
    let c = key.charCodeAt(i);
    if (c < 0x80) {
      h = step(h, c);
      continue;
    }
    if (c < 0x800) {
      h = step(step(h, 0xc0 | (c >> 6)), 0x80 | (c & 0x3f));
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < key.length ? key.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        // A surrogate pair: one code point of four bytes.
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
        h = step(h, 0xf0 | (c >> 18));
        h = step(h, 0x80 | ((c >> 12) & 0x3f));
        h = step(h, 0x80 | ((c >> 6) & 0x3f));
        h = step(h, 0x80 | (c & 0x3f));
        continue;
      }
      c = 0xfffd; // A lone surrogate, as TextEncoder writes it.
    }
    h = step(step(step(h, 0xe0 | (c >> 12)), 0x80 | ((c >> 6) & 0x3f)), 0x80 | (c & 0x3f));
  }
  return h >>> 0;
}
