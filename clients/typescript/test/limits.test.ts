// A server with small limits: lost events arrive as "dropped" events, and
// the client pings while it has nothing to send, so an idle timeout never
// closes it.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { connect, type FireEvent } from "../src/index.js";
import { ADMIN_TOKEN, Reader, startServer, type RunningServer } from "../testkit/server.js";

let srv: RunningServer;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "tickwheel-ts-cfg-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const cfg = join(dir, "small.yaml");
  writeFileSync(cfg, "limits:\n  max_backlog: 5\ntimeouts:\n  idle: 300ms\n");
  srv = await startServer(["-config", cfg, "-frozen", "-start-tick", "1000"]);
});

after(async () => {
  await srv.stop();
});

test("events dropped from a full backlog arrive as a dropped event, ahead of the rest", async () => {
  const c = await connect(srv.addr, { token: ADMIN_TOKEN });
  const r = new Reader(c);
  for (let i = 1; i <= 8; i++) await c.add(1, i, i);
  await c.fastForward(8); // receiver 1 is not bound: its backlog keeps the last 5
  const res = await c.bind(1);
  assert.deepEqual([res.pending, res.dropped], [5n, 3n]);
  const evs = await r.take(6);
  assert.deepEqual(evs[0], { kind: "dropped", receiver: 1n, count: 3n });
  assert.deepEqual(evs.slice(1).map((e) => (e as FireEvent).tid), [4n, 5n, 6n, 7n, 8n]);
  assert.equal(c.dropped, 3n);
  await c.close();
});

test("an idle client stays connected: it pings", async () => {
  const c = await connect(srv.addr, { name: "idle" });
  try {
    assert.equal(c.limits.idle_timeout_ms, 300n);
    let disconnects = 0;
    c.on("disconnect", () => disconnects++);
    const session = c.session;
    await new Promise((r) => setTimeout(r, 1200)); // four idle timeouts
    assert.equal(disconnects, 0);
    assert.equal(c.session, session, "the same session");
    await c.ping();
  } finally {
    await c.close();
  }
});

test("a server's closing notice (idle timeout) is a warning, then the client reconnects", async () => {
  const c = await connect(srv.addr, { name: "silent", reconnect: { minMs: 10, maxMs: 20 } });
  try {
    const warnings: Error[] = [];
    c.on("warning", (e: Error) => warnings.push(e));
    // Stop this connection's idle pings (a private timer; the next
    // connection gets its own), so that the server's idle timeout runs out.
    (c as unknown as { idleTimer: NodeJS.Timeout }).idleTimer.close();
    const gone = new Promise((r) => c.once("disconnect", r));
    await gone;
    await c.ping(); // reconnected
    assert.ok(warnings.some((w) => (w as { code?: string }).code === "timeout"), warnings.map(String).join("; "));
  } finally {
    await c.close();
  }
});
