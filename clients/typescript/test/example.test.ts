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

test("the game-server example", async () => {
  const logs: string[] = [];
  const { tw, done } = await runZone(srv.addr, "", (s) => logs.push(s));
  const admin = await connect(srv.addr, { token: ADMIN_TOKEN });
  await admin.fastForward(300); // 3 s of 10 ms ticks
  await done;
  await tw.close();
  await admin.close();
  assert.deepEqual(logs, [
    "cooldown already running",
    "regen 1/3",
    'cooldown over: {"player":42,"spell":"fireball"}',
    "regen 2/3",
    "regen 3/3 (last)",
  ]);
});
