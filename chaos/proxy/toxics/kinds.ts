/**
 * The toxic types this server knows, with the integer attributes each one has (Toxiproxy's JSON
 * tags: every one is present in responses, 0 when not given) and the stage that implements it.
 */
import { BandwidthStage } from './bandwidth.js';
import { LatencyStage } from './latency.js';
import { LimitDataStage } from './limit-data.js';
import { NoopStage } from './noop.js';
import { ResetPeerStage } from './reset-peer.js';
import { SlicerStage } from './slicer.js';
import { SlowCloseStage } from './slow-close.js';
import type { Outlet, Stage, StageContext } from './stage.js';
import { TimeoutStage } from './timeout.js';

export interface ToxicKind {
  readonly attributeNames: readonly string[];
  createStage(ctx: StageContext, next: Outlet): Stage;
}

export const TOXIC_KINDS: Readonly<Record<string, ToxicKind>> = {
  latency: { attributeNames: ['latency', 'jitter'], createStage: (c, n) => new LatencyStage(c, n) },
  bandwidth: { attributeNames: ['rate'], createStage: (c, n) => new BandwidthStage(c, n) },
  slow_close: { attributeNames: ['delay'], createStage: (c, n) => new SlowCloseStage(c, n) },
  timeout: { attributeNames: ['timeout'], createStage: (c, n) => new TimeoutStage(c, n) },
  reset_peer: { attributeNames: ['timeout'], createStage: (c, n) => new ResetPeerStage(c, n) },
  slicer: {
    attributeNames: ['average_size', 'size_variation', 'delay'],
    createStage: (c, n) => new SlicerStage(c, n),
  },
  limit_data: { attributeNames: ['bytes'], createStage: (c, n) => new LimitDataStage(c, n) },
  noop: { attributeNames: [], createStage: (c, n) => new NoopStage(c, n) },
};

export function toxicKind(type: string): ToxicKind | undefined {
  return Object.hasOwn(TOXIC_KINDS, type) ? TOXIC_KINDS[type] : undefined;
}
