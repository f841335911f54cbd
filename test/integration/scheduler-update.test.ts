// Real processes, a real webhook receiver: an update owns the future. A slot the old definition
// planned ahead (inside the look-ahead) and the new one does not have is never delivered, but
// recorded CANCELLED as superseded; the new schedule's slots arrive; a slot both definitions
// have fires once, with the new definition (docs/schedules.md).
import t from 'tap';
import { sleep } from '../helpers/cluster.js';
import { SchedulerCluster, slotAhead } from '../helpers/scheduler-cluster.js';

/** Sleeps until `atMs` on this machine's clock (the nodes share it). */
async function until(atMs: number): Promise<void> {
  await sleep(Math.max(0, atMs - Date.now()));
}

t.test(
  'an update right before a planned slot: the old slot never fires, the new ones do',
  async (t) => {
    const sc = await SchedulerCluster.start(t);
    // Slots at .500 of every other second; the new schedule's are whole multiples of 3 s, so the
    // two definitions share no slot.
    const anchor = slotAhead(2000) + 500;
    await sc.createJob('upd-sched', { schedule: 'every 2s', anchorMs: anchor });
    // A slot well inside the look-ahead (3 s) when the update is made, 400 ms before it.
    const planned = anchor + 4000;
    await until(planned - 400);
    const updated = await sc.updateJob('upd-sched', { schedule: '*/3 * * * * *' });
    const stampMs = updated.updatedAtMs;
    t.ok(
      stampMs < planned,
      `the update was stamped before the planned slot (${planned - stampMs} ms)`,
    );
    t.equal(updated.version, 2);
    await sleep(7000);
    const got = sc.sink.of('upd-sched');
    const before = got.filter((r) => r.slotMs < stampMs);
    const after = got.filter((r) => r.slotMs >= stampMs);
    t.ok(before.length >= 1, `the old definition fired before the update (${before.length})`);
    t.same(
      after.filter((r) => r.slotMs % 3000 !== 0).map((r) => new Date(r.slotMs).toISOString()),
      [],
      'no slot the new schedule does not own was delivered after the update',
    );
    t.ok(after.length >= 2, `the new schedule's slots arrived (${after.length})`);
    t.same(
      after.map((r) => r.slotMs),
      [...new Set(after.map((r) => r.slotMs))],
      'each new slot once',
    );
    const run = await sc.runOf('upd-sched', planned, (r) => r.status !== 'SCHEDULED');
    t.equal(run.status, 'CANCELLED', 'the slot planned from the old schedule is cancelled');
    t.match(run.reason ?? '', /^superseded by update to version 2$/, 'with the reason');
    t.equal(run.attempts.length, 0, 'and never attempted');
  },
);

t.test(
  "an update of target and payload keeps the schedule's next slot: it fires once, new",
  async (t) => {
    const sc = await SchedulerCluster.start(t);
    await sc.createJob('upd-payload', { schedule: '* * * * * *', payload: { v: 1 } });
    const slot = slotAhead(2500);
    await until(slot - 400);
    const updated = await sc.updateJob('upd-payload', {
      schedule: '* * * * * *',
      payload: { v: 2 },
      target: { url: `${sc.sink.url}/hook-v2` },
    });
    const stampMs = updated.updatedAtMs;
    t.ok(stampMs < slot, `the update was stamped before the planned slot (${slot - stampMs} ms)`);
    await sleep(4000);
    const upTo = Date.now() - 1000;
    const got = sc.sink.of('upd-payload').filter((r) => r.slotMs <= upTo);
    const slots = got.map((r) => r.slotMs);
    t.same(new Set(slots).size, slots.length, 'each slot once');
    for (let i = 1; i < slots.length; i++)
      t.equal(slots[i]! - slots[i - 1]!, 1000, 'no slot skipped across the update');
    t.ok(slots.includes(slot), 'the slot planned before the update fired');
    const after = got.filter((r) => r.slotMs >= stampMs);
    t.ok(after.length >= 3, `slots after the update arrived (${after.length})`);
    t.same(
      after.filter((r) => JSON.stringify(r.body['payload']) !== '{"v":2}').map((r) => r.fireId),
      [],
      'every slot from the update on carries the new payload',
    );
    const run = await sc.runOf('upd-payload', slot, (r) => r.status !== 'SCHEDULED');
    t.equal(run.status, 'SUCCEEDED', 'the kept slot succeeded');
  },
);
