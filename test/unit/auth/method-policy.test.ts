// Every method of every service a node serves has a reviewed requirement, and what each role
// passes.
import t from 'tap';
import { authorize, METHOD_POLICY } from '../../../src/auth/method-policy.js';
import type { Principal } from '../../../src/auth/principal.js';
import { loadApiServices } from '../../../src/api/proto.js';

t.test('every served method is in the policy, and nothing else is', (t) => {
  const served: string[] = [];
  const services = loadApiServices();
  for (const service of Object.keys(services) as (keyof typeof services)[])
    for (const method of Object.keys(services[service].service))
      served.push(`${service}.${method}`);
  t.same(served.sort(), Object.keys(METHOD_POLICY).sort());
  t.end();
});

t.test('roles', (t) => {
  const tenant = (role: 'reader' | 'writer' | 'worker'): Principal => ({
    kind: 'tenant',
    tenant: 'acme',
    role,
    tokenId: 'tok_x',
  });
  const passes = (p: Principal, method: string): boolean => {
    try {
      authorize(p, METHOD_POLICY[method]!, method);
      return true;
    } catch (err) {
      t.equal((err as { code: string }).code, 'PERMISSION_DENIED');
      return false;
    }
  };
  const admin: Principal = { kind: 'admin', tokenId: 'bootstrap' };
  for (const method of Object.keys(METHOD_POLICY)) t.ok(passes(admin, method), `admin: ${method}`);
  t.ok(passes(tenant('reader'), 'JobService.GetJob'));
  t.notOk(passes(tenant('reader'), 'JobService.CreateJob'), 'a reader cannot write');
  t.ok(passes(tenant('writer'), 'JobService.CreateJob'));
  t.ok(passes(tenant('writer'), 'RunService.ListRuns'), 'a writer reads too');
  t.notOk(passes(tenant('writer'), 'WorkerService.Work'), 'a writer is no worker');
  t.ok(passes(tenant('worker'), 'WorkerService.Work'));
  t.notOk(passes(tenant('worker'), 'JobService.GetJob'), 'a worker reads nothing');
  t.ok(passes(tenant('worker'), 'AdminService.ClusterStatus'), 'workers find the nodes');
  for (const method of Object.keys(METHOD_POLICY).filter(
    (m) => METHOD_POLICY[m] === 'admin' || METHOD_POLICY[m] === 'node',
  ))
    t.notOk(passes(tenant('writer'), method), `no tenant token passes ${method}`);
  t.ok(
    Object.entries(METHOD_POLICY).every(
      ([m, need]) => m.startsWith('NodeService.') === (need === 'node'),
    ),
    'exactly the node-to-node methods are node-only',
  );
  t.end();
});
