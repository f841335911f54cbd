/**
 * The public API of one node: JobService, RunService, TenantService, WorkerService and
 * AdminService (plus the node-to-node NodeService) on the node's client gRPC server (`--listen`),
 * which serves nothing else (the test-only DebugService has a server and port of its own), and
 * the registration of this node's client API address in the meta group, which is what lets other
 * nodes forward to it.
 */
import type * as grpc from '@grpc/grpc-js';
import type { Authenticator } from '../auth/authenticator.js';
import { SystemClock } from '../base/clock.js';
import { MoveDriver } from '../cluster/membership-admin.js';
import { SplitDriver } from '../cluster/split-admin.js';
import { bindGrpcServer, createGrpcServer, shutdownGrpcServer } from './grpc-server.js';
import { META_GROUP_ID } from '../placement/bootstrap-plan.js';
import { encodeMetaCommand } from '../placement/meta-state.js';
import { adminServiceHandlers, nodeServiceHandlers } from './admin-service.js';
import { ApiContext } from './api-context.js';
import type { ApiNode } from './api-node.js';
import { guardService } from './auth-guard.js';
import { jobServiceHandlers } from './job-service.js';
import { runServiceHandlers } from './run-service.js';
import type { ApiLogger } from './service-kit.js';
import { tenantServiceHandlers } from './tenant-service.js';
import { tokenServiceHandlers } from './token-service.js';
import { workerServiceHandlers } from './worker-service.js';

/** How often a node checks that the meta group holds its API address. */
export const REGISTER_EVERY_MS = 500;

export class ApiServer {
  private readonly api: ApiContext;
  private timer: NodeJS.Timeout | undefined;
  private registering = false;
  /** Carries replica moves through their steps while this node leads the meta group. */
  private readonly moves: MoveDriver;
  /** Carries range splits through (and triggers them) while this node leads the meta group. */
  readonly splits: SplitDriver;
  private server: grpc.Server | undefined;

  constructor(
    private readonly node: ApiNode,
    /** The address other nodes reach this node's client API at. */
    private readonly apiAddress: string,
    /** The address clients are told to dial (--advertise-address); '' when it is apiAddress. */
    private readonly advertisedAddress: string,
    private readonly log: ApiLogger,
    /** Checks every call's credentials (src/auth/authenticator.ts). */
    private readonly auth: Authenticator,
    /** The bootstrap admin token, presented on this node's calls to other nodes. */
    nodeToken: string | undefined,
  ) {
    this.api = new ApiContext(node, log, nodeToken);
    this.moves = new MoveDriver(this.api, log);
    this.splits = new SplitDriver(this.api, log);
  }

  /**
   * Creates the client API's gRPC server and binds it on `address` (host:port); resolves with
   * the port. Rejects when the address cannot be bound (close() releases what was made).
   */
  async listen(address: string, credentials?: grpc.ServerCredentials): Promise<number> {
    const server = createGrpcServer({
      // Pings on idle connections find a pull-based worker whose host vanished (no FIN): its
      // stream ends and its leases return their runs within ~20 s, before their own bound.
      'grpc.keepalive_time_ms': 10_000,
      'grpc.keepalive_timeout_ms': 10_000,
    });
    this.addTo(server);
    this.server = server;
    return bindGrpcServer(server, address, credentials);
  }

  /** Adds every service, each handler behind the authentication and authorization guard. */
  addTo(server: grpc.Server): void {
    const s = this.api.services;
    const add = (name: keyof typeof s, impl: grpc.UntypedServiceImplementation): void => {
      const def = s[name].service;
      server.addService(def, guardService(name, def, impl, this.auth, this.log, this.node.tracing));
    };
    add('JobService', jobServiceHandlers(this.api));
    add('RunService', runServiceHandlers(this.api));
    add('TenantService', tenantServiceHandlers(this.api));
    add('TokenService', tokenServiceHandlers(this.api, SystemClock));
    add('AdminService', adminServiceHandlers(this.api));
    add('NodeService', nodeServiceHandlers(this.api));
    add(
      'WorkerService',
      workerServiceHandlers(this.node, this.log, (p) => this.auth.stillValid(p)),
    );
  }

  start(): void {
    // The node's scheduler exists once the node started: from now on its leaders read their
    // waiting runs' upstreams through this API's routing.
    this.node.scheduler.setUpstreamReader((jobKey, slotMs) =>
      this.api.readUpstream(jobKey, slotMs),
    );
    this.timer = setInterval(() => this.register(), REGISTER_EVERY_MS);
    this.timer.unref();
    this.moves.start();
    this.splits.start();
  }

  /**
   * Makes the meta group record this node's API address: proposed directly when this node leads
   * the meta group, else sent to the meta leader (whose own address is recorded, since a meta
   * leader always registers itself first).
   */
  private register(): void {
    const meta = this.node.meta;
    const me = meta.members.get(this.node.id);
    if (
      !meta.initialized ||
      !me ||
      (me.apiAddress === this.apiAddress &&
        (me.advertisedAddress ?? '') === this.advertisedAddress) ||
      this.registering
    )
      return;
    const g = this.node.host.groups.get(META_GROUP_ID);
    if (!g) return;
    let p: Promise<unknown>;
    if (g.isLeader) {
      p = this.node.host.propose(
        META_GROUP_ID,
        encodeMetaCommand({
          op: 'set-api-address',
          id: this.node.id,
          apiAddress: this.apiAddress,
          advertisedAddress: this.advertisedAddress,
        }),
      );
    } else {
      const address = meta.members.get(g.leaderId)?.apiAddress ?? '';
      if (address === '') return;
      p = this.api.router.forward(
        address,
        this.api.method('NodeService', 'RegisterApiAddress'),
        {
          nodeId: this.node.id,
          apiAddress: this.apiAddress,
          advertisedAddress: this.advertisedAddress,
        },
        { deadlineMs: Date.now() + 2000, forwarded: false, route: undefined },
        META_GROUP_ID,
      );
    }
    this.registering = true;
    p.then(
      () => {
        this.registering = false;
        this.log.info(
          { apiAddress: this.apiAddress, advertisedAddress: this.advertisedAddress },
          'API address registered',
        );
      },
      (err: unknown) => {
        // The next tick tries again (a leader change, a node not up yet).
        this.registering = false;
        this.log.warn({ err: String(err) }, 'API address not registered yet');
      },
    );
  }

  /** Stops the drivers and the registration, and closes the client API server (if listening). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.moves.stop();
    this.splits.stop();
    this.api.router.close();
    const server = this.server;
    this.server = undefined;
    await shutdownGrpcServer(server);
  }
}
