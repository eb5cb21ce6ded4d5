// The README's game-server example (examples/game-server.ts, the same text
// as the README's block) runs against the real server.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";

import { connect } from "../src/index.js";
import { runZone } from "../examples/game-server.js";
import { ADMIN_TOKEN, repoRoot, startServer, type RunningServer } from "../testkit/server.js";

let srv: RunningServer;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv.stop();
});

test("the README shows examples/game-server.ts", () => {
  const readme = readFileSync(`${repoRoot}README.md`, "utf8");
  const example = readFileSync(new URL("../../examples/game-server.ts", import.meta.url), "utf8");
  assert.ok(readme.includes("```ts\n" + example + "```\n"), "README.md's game-server block differs from clients/typescript/examples/game-server.ts");
});

const expected = [
  "cooldown already running",
  "regen 1/3",
  'cooldown over: {"player":42,"spell":"fireball"}',
  "regen 2/3",
  "regen 3/3 (last)",
];

// runOnce runs the example to its end as `node dist/examples/game-server.js`
// does (tw-time moved on by an admin) and returns what it logged.
async function runOnce(): Promise<string[]> {
  const logs: string[] = [];
  const { tw, done } = await runZone(srv.addr, "", (s) => logs.push(s));
  const admin = await connect(srv.addr, { token: ADMIN_TOKEN });
  await admin.fastForward(300); // 3 s of 10 ms ticks
  await done;
  await tw.close();
  await admin.close();
  return logs;
}

// Run twice in a row against one server, the second run handles its own
// events: the first left none unacknowledged (its last event used to come
// again at the second's bind and end it at once) and none of its timers.
test("the game-server example, twice in a row", async () => {
  assert.deepEqual(await runOnce(), expected);
  assert.deepEqual(await runOnce(), expected);
  const admin = await connect(srv.addr, { token: ADMIN_TOKEN });
  const st = await admin.stats();
  await admin.close();
  assert.equal(st.outboxEvents, 0n, "events left unacknowledged");
});

// A run that stopped before its timers fired (killed, say) leaves them
// running: the next run meets "exists" for each, and handles their events.
test("the game-server example after a run that stopped early", async () => {
  const first: string[] = [];
  const { tw, done } = await runZone(srv.addr, "", (s) => first.push(s));
  await tw.close();
  await done;
  assert.deepEqual(first, ["cooldown already running"]);
  assert.deepEqual(await runOnce(), ["cooldown already running", "regen already running", ...expected]);
});
