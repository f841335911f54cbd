/**
 * The environment `npm start` (cluster/start.ts) reads to place a local cluster: its home
 * directory and the loopback address and ports of its first node.
 */
export interface LocalClusterPlace {
  readonly home: string;
  readonly host: string;
  readonly api: number;
  readonly peer: number;
  readonly metrics: number;
  /** The HTTP/JSON API's first port; absent: start.ts's default (8001). */
  readonly http?: number;
}

export function localClusterEnv(p: LocalClusterPlace): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TICKRAFT_HOME: p.home,
    TICKRAFT_HOST: p.host,
    TICKRAFT_API_PORT: String(p.api),
    TICKRAFT_PEER_PORT: String(p.peer),
    TICKRAFT_METRICS_PORT: String(p.metrics),
    ...(p.http === undefined ? {} : { TICKRAFT_HTTP_PORT: String(p.http) }),
  };
}
