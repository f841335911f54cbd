// Which addresses a webhook may reach (src/delivery/target-policy.ts). Goal: every range the
// default refuses is refused with its kind named, at its edges and in its IPv6 disguises
// (IPv4-mapped, IPv4-compatible, NAT64), the addresses around those ranges stay allowed, a
// create-time host check refuses literals and localhost names but leaves other names to the
// connect step, `--allow-target` widens exactly the ranges it names, and a bad range is refused
// with a reason that names it. Method: tables of addresses, no I/O.
import t from 'tap';
import { ValidationError } from '../../../src/base/errors.js';
import {
  describeRefusal,
  formatCidr,
  hostRefusalReason,
  parseCidr,
  parseCidrList,
  TargetPolicy,
  type ForbiddenKind,
} from '../../../src/delivery/target-policy.js';

const STRICT = TargetPolicy.STRICT;

/** [address, the kind it is refused as]. */
const REFUSED: [string, ForbiddenKind][] = [
  ['127.0.0.1', 'loopback'],
  ['127.0.0.0', 'loopback'],
  ['127.255.255.255', 'loopback'],
  ['127.1.2.3', 'loopback'],
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['10.0.0.1', 'private'],
  ['10.0.0.0', 'private'],
  ['10.255.255.255', 'private'],
  ['172.16.0.0', 'private'],
  ['172.20.1.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.0.0', 'private'],
  ['192.168.255.255', 'private'],
  ['169.254.169.254', 'link-local'],
  ['169.254.0.0', 'link-local'],
  ['169.254.255.255', 'link-local'],
  ['fe80::1', 'link-local'],
  ['febf:ffff::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['fc00::1', 'unique-local'],
  ['fd12:3456::1', 'unique-local'],
  ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'unique-local'],
  ['100.64.0.0', 'cgnat'],
  ['100.100.100.200', 'cgnat'],
  ['100.127.255.255', 'cgnat'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['ff02::1', 'multicast'],
  ['ff05::1:3', 'multicast'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['::', 'unspecified'],
  ['255.255.255.255', 'broadcast'],
  // IPv6 forms of forbidden IPv4 addresses.
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::FFFF:7F00:1', 'loopback'],
  ['[::ffff:127.0.0.1]', 'loopback'],
  ['::ffff:10.1.2.3', 'private'],
  ['::ffff:a9fe:a9fe', 'link-local'],
  ['::ffff:0.0.0.0', 'unspecified'],
  ['::127.0.0.1', 'loopback'],
  ['::7f00:1', 'loopback'],
  ['::192.168.1.1', 'private'],
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::a9fe:a9fe', 'link-local'],
  ['64:ff9b::10.0.0.1', 'private'],
];

const ALLOWED: string[] = [
  '8.8.8.8',
  '1.1.1.1',
  '126.255.255.255',
  '128.0.0.0',
  '9.255.255.255',
  '11.0.0.0',
  '172.15.255.255',
  '172.32.0.0',
  '192.167.255.255',
  '192.169.0.0',
  '169.253.255.255',
  '169.255.0.0',
  '100.63.255.255',
  '100.128.0.0',
  '223.255.255.255',
  '1.0.0.0',
  '2001:4860:4860::8888',
  '2606:4700::1111',
  'fec0::1',
  'fbff::1',
  'fe7f::1',
  '::ffff:8.8.8.8',
  '::8.8.8.8',
  '64:ff9b::8.8.8.8',
  '64:ff9b:1::7f00:1', // not the /96 well-known prefix
  '::2:7f00:1', // beyond ::/96: no embedded IPv4
];

t.test('the default refuses every forbidden range, naming the kind', (t) => {
  for (const [address, kind] of REFUSED) {
    const r = STRICT.checkAddress(address);
    t.equal(r?.kind, kind, `${address}: ${kind}`);
  }
  t.end();
});

t.test('the default allows the addresses around them', (t) => {
  for (const address of ALLOWED) t.equal(STRICT.checkAddress(address), undefined, address);
  t.end();
});

t.test('a refusal says what the address is, and through which embedding', (t) => {
  t.equal(describeRefusal(STRICT.checkAddress('127.0.0.1')!), 'a loopback address 127.0.0.1');
  t.equal(
    describeRefusal(STRICT.checkAddress('::ffff:7f00:1')!),
    'a loopback address ::ffff:7f00:1 (IPv4-mapped 127.0.0.1)',
  );
  t.equal(
    describeRefusal(STRICT.checkAddress('::7f00:1')!),
    'a loopback address ::7f00:1 (IPv4-compatible 127.0.0.1)',
  );
  t.equal(
    describeRefusal(STRICT.checkAddress('64:ff9b::a9fe:a9fe')!),
    'a link-local address 64:ff9b::a9fe:a9fe (NAT64 169.254.169.254) (where cloud metadata services answer)',
  );
  t.match(describeRefusal(STRICT.checkAddress('10.0.0.1')!), /private \(RFC 1918\) address 10/);
  t.match(describeRefusal(STRICT.checkAddress('100.64.0.1')!), /carrier-grade NAT/);
  t.match(describeRefusal(STRICT.checkAddress('255.255.255.255')!), /^the broadcast address/);
  t.equal(STRICT.checkAddress('not-an-address')?.kind, 'unspecified', 'a name is never passed');
  t.end();
});

t.test('the create-time host check: literals and localhost names, not other names', (t) => {
  const reason = (host: string): string | undefined => {
    const r = STRICT.checkHost(host);
    return r === undefined ? undefined : hostRefusalReason(host, r);
  };
  t.equal(
    reason('127.0.0.1'),
    'resolves to a loopback address 127.0.0.1, which webhooks may not reach; ' +
      'a node started with --allow-target covering it may',
  );
  t.match(reason('[::1]'), /^resolves to a loopback address ::1, which webhooks may not reach/);
  t.match(reason('[::ffff:7f00:1]'), /IPv4-mapped 127\.0\.0\.1/);
  t.match(reason('169.254.169.254'), /link-local address 169\.254\.169\.254 .*metadata/);
  for (const name of ['localhost', 'localhost.', 'api.localhost', 'a.b.localhost'])
    t.match(
      reason(name),
      new RegExp(`^${name.replace(/\./g, '\\.')} is a name that always resolves to a loopback`),
      name,
    );
  for (const name of ['example.com', 'localhost.example.com', 'notlocalhost', '8.8.8.8'])
    t.equal(reason(name), undefined, `${name}: left to the connect step`);
  t.end();
});

t.test('--allow-target widens exactly the ranges it names', (t) => {
  const loop = TargetPolicy.of(['127.0.0.0/8']);
  for (const a of ['127.0.0.1', '127.9.8.7', '::ffff:127.0.0.1', '::127.0.0.1', '64:ff9b::7f00:1'])
    t.equal(loop.checkAddress(a), undefined, `${a} allowed`);
  t.equal(loop.checkAddress('::1')?.kind, 'loopback', '::1 is not in 127.0.0.0/8');
  t.equal(loop.checkAddress('10.0.0.1')?.kind, 'private', 'other kinds stay refused');
  t.equal(loop.checkHost('localhost'), undefined, 'localhost: left to the connect step');

  const narrow = TargetPolicy.of(['10.1.2.0/24', 'fd00:1::/32']);
  t.equal(narrow.checkAddress('10.1.2.200'), undefined);
  t.equal(narrow.checkAddress('10.1.3.1')?.kind, 'private', 'next /24 still refused');
  t.equal(narrow.checkAddress('fd00:1:ffff::1'), undefined);
  t.equal(narrow.checkAddress('fd00:2::1')?.kind, 'unique-local');
  t.equal(narrow.checkHost('localhost')?.kind, 'loopback', 'localhost still refused');

  const v6loop = TargetPolicy.of(['::1']);
  t.equal(v6loop.checkAddress('::1'), undefined);
  t.equal(v6loop.checkAddress('127.0.0.1')?.kind, 'loopback');
  t.equal(v6loop.checkHost('localhost'), undefined, 'localhost may resolve to ::1');

  const host = TargetPolicy.of(['169.254.169.254/32']);
  t.equal(host.checkAddress('169.254.169.254'), undefined);
  t.equal(host.checkAddress('169.254.169.253')?.kind, 'link-local');

  const comma = TargetPolicy.of(['10.0.0.0/8, 192.168.0.0/16', '127.0.0.1']);
  t.same(comma.allowed.map(formatCidr), ['10.0.0.0/8', '192.168.0.0/16', '127.0.0.1/32']);
  t.equal(comma.checkAddress('192.168.7.7'), undefined);
  t.equal(comma.checkAddress('127.0.0.2')?.kind, 'loopback', 'a bare address is a /32');
  t.end();
});

t.test('ranges parse, and a bad one is named with its reason', (t) => {
  t.same(parseCidr('127.0.0.0/8'), { address: '127.0.0.0', prefix: 8, family: 4 });
  t.same(parseCidr(' fd00::/8 '), { address: 'fd00::', prefix: 8, family: 6 });
  t.same(parseCidr('::1'), { address: '::1', prefix: 128, family: 6 });
  t.same(parseCidr('0.0.0.0/0'), { address: '0.0.0.0', prefix: 0, family: 4 });
  t.same(parseCidr('2001:DB8:0:0:1:0:0:1/128'), {
    address: '2001:db8::1:0:0:1',
    prefix: 128,
    family: 6,
  });
  t.same(parseCidr('::ffff:10.0.0.0/104'), { address: '::ffff:a00:0', prefix: 104, family: 6 });
  const bad: [string, RegExp][] = [
    ['nope', /'nope' is not an IP range/],
    ['10.0.0.300/8', /'10\.0\.0\.300\/8' is not an IP range/],
    ['10.0.0.0/33', /prefix length that is not an integer in \[0, 32\]/],
    ['fd00::/129', /not an integer in \[0, 128\]/],
    ['10.0.0.0/', /prefix length/],
    ['10.0.0.0/x', /prefix length/],
    ['127.0.0.1/8', /bits set past its \/8 prefix \(did you mean 127\.0\.0\.0\/8\?\)/],
    ['fd00::1/8', /did you mean fd00::\/8\?/],
    ['fe80::1%eth0/64', /carries a zone/],
    ['', /is not an IP range/],
  ];
  for (const [text, reason] of bad) t.match(parseCidr(text), reason, JSON.stringify(text));
  const list = parseCidrList(['127.0.0.0/8,', 'x/1']);
  t.same(list.ok, false);
  if (!list.ok) {
    t.equal(list.reasons.length, 2, 'every bad entry is named');
    t.match(list.reasons[0], /'127\.0\.0\.0\/8,' holds an empty range/);
  }
  const err = (() => {
    try {
      TargetPolicy.of(['10.0.0.0/8', 'banana']);
      return undefined;
    } catch (e) {
      return e;
    }
  })();
  t.type(err, ValidationError);
  t.equal((err as ValidationError).code, 'TARGET_POLICY_INVALID');
  t.same(
    (err as ValidationError).violations.map((v) => v.field),
    ['allowTarget'],
  );
  t.end();
});
