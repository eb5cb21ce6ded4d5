// Groups and the bulk calls (issue 27) against the real server binary, its
// bulk operations going 5 timers a loop turn so that each spans turns.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { TickwheelError, connect, type Client } from "../src/index.js";
import { ADMIN_TOKEN, startServer, type RunningServer } from "../testkit/server.js";

let srv: RunningServer;
let c: Client;

before(async () => {
  const cfg = join(mkdtempSync(join(tmpdir(), "tw-groups-")), "tickwheel.yaml");
  writeFileSync(cfg, "limits:\n  max_bulk_per_turn: 5\n");
  srv = await startServer(["-frozen", "-start-tick", "1000", "-config", cfg]);
  c = await connect(srv.addr, { name: "groups", token: ADMIN_TOKEN });
});

after(async () => {
  await c.close();
  await srv.stop();
});

test("groups: add's group, listGroup, pauseGroup/resumeGroup keep the ticks left, cancelGroup", async () => {
  for (let i = 0; i < 12; i++) await c.add(1 + (i % 3), i, 10 + i, { group: 7n });
  await c.add(1, 100, 10);
  assert.equal((await c.get(2, 1)).group, 7n);
  assert.equal((await c.get(1, 100)).group, 0n);
  const all = await c.listGroup(7);
  assert.equal(all.length, 12);
  assert.deepEqual([all[0].receiver, all[0].tid, all[11].receiver, all[11].tid], [1n, 0n, 3n, 11n]);
  const page = await c.listGroupPage(7, 0, 0, 2);
  assert.deepEqual([page.timers.length, page.nextReceiver, page.nextTid], [2, 1n, 6n]);

  assert.equal(await c.pauseGroup(7), 12n);
  await c.add(3, 200, 5, { group: 7n });
  assert.equal((await c.get(3, 200)).paused, true, "added to a paused group: starts paused");
  const { fired } = await c.fastForward(50);
  assert.equal(fired, 1n, "only the timer outside the group fired");
  const t = await c.get(2, 4);
  assert.deepEqual([t.paused, t.remaining], [true, 14n]);
  assert.equal(await c.resumeGroup(7), 13n);
  assert.deepEqual([(await c.get(2, 4)).remaining, (await c.get(2, 4)).due], [14n, 1064n]);

  assert.equal(await c.pauseAll(3), 5n);
  assert.equal(await c.resumeAll(3), 5n);
  assert.equal(await c.cancelGroup(7), 13n);
  assert.deepEqual(await c.listGroup(7), []);
  await assert.rejects(c.cancelGroup(0), RangeError);
  await assert.rejects(c.pauseGroup(0), RangeError);
});

test("groups: a receiver and a group at once is invalid_argument", async () => {
  await assert.rejects(
    (c as unknown as { call(op: string, r: object): Promise<unknown> }).call("pause_all", { receiver: 1n, group: 2n }),
    (err: unknown) => err instanceof TickwheelError && err.code === "invalid_argument",
  );
});
