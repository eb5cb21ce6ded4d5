// End to end against the real server binary (go build): the README tour,
// the seed example's firing table, errors for bad input, pipelining,
// AbortSignal, reconnect with re-bind, acknowledged delivery.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import { ClosedError, TickwheelError, connect, type Client, type Event, type FireEvent } from "../src/index.js";
import { ADMIN_TOKEN, Reader, Relay, line, startServer, type RunningServer } from "../testkit/server.js";

let srv: RunningServer;
const clients: Client[] = [];

before(async () => {
  srv = await startServer();
});

after(async () => {
  for (const c of clients) await c.close();
  await srv.stop();
});

async function dial(name: string, token = ADMIN_TOKEN, addr = srv.addr, extra = {}): Promise<Client> {
  const c = await connect(addr, { name, token, ...extra });
  clients.push(c);
  return c;
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof TickwheelError, `want a TickwheelError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

test("the README tour", async () => {
  const admin = await dial("tour");
  const watcher = await dial("watch-1", "");
  const w = new Reader(watcher);
  const now = await admin.ping();
  const T = now; // frozen: tw-time moves only by fast-forwards
  assert.deepEqual(await watcher.bind(1), { pending: 0n, dropped: 0n, firstSeq: 1n });

  assert.equal(await admin.add(1, 11, 3, { repeat: 4, data: "poison" }), T + 3n);
  assert.equal(await admin.add(1, 12, 1, { repeat: 5 }), T + 1n);
  assert.equal(await admin.add(2, 20, 3, { repeat: "forever" }), T + 3n);
  const ls = await admin.list(1);
  assert.deepEqual(ls.map((t) => [t.tid, t.due, t.every, t.fired, t.repeat]), [[11n, T + 3n, 3n, 0n, 4n], [12n, T + 1n, 1n, 0n, 5n]]);
  assert.equal(Buffer.from(ls[0].data!).toString(), "poison");
  assert.deepEqual(await admin.fastForward(6), { now: T + 6n, fired: 9n });

  const evs = await w.take(7);
  assert.deepEqual(evs.map(line), [
    `tick ${T + 1n}  1/12  fired 1/5`,
    `tick ${T + 2n}  1/12  fired 2/5`,
    `tick ${T + 3n}  1/11  fired 1/4  data "poison"`,
    `tick ${T + 3n}  1/12  fired 3/5`,
    `tick ${T + 4n}  1/12  fired 4/5`,
    `tick ${T + 5n}  1/12  fired 5/5  last`,
    `tick ${T + 6n}  1/11  fired 2/4  data "poison"`,
  ]);
  const t11 = await admin.get(1, 11);
  assert.deepEqual([t11.due, t11.remaining, t11.fired], [T + 9n, 3n, 2n]);

  // Nobody watched receiver 2: binding it delivers its backlog.
  const w2c = await dial("watch-2", "");
  const w2 = new Reader(w2c);
  assert.deepEqual(await w2c.bind(2), { pending: 2n, dropped: 0n, firstSeq: 1n });
  const evs2 = await w2.take(2);
  assert.deepEqual(evs2.map(line), [`tick ${T + 3n}  2/20  fired 1/forever`, `tick ${T + 6n}  2/20  fired 2/forever`]);
  // Forever reads back as it was asked for, in events and timers alike.
  assert.deepEqual(evs2.map((e) => e.kind === "fire" && e.repeat), ["forever", "forever"]);
  assert.equal((await admin.get(2, 20)).repeat, "forever");
  assert.deepEqual((await admin.list(2)).map((t) => t.repeat), ["forever"]);
  assert.deepEqual((await admin.listPage(2)).timers.map((t) => t.repeat), ["forever"]);
  const st = await admin.stats();
  assert.equal(st.now, T + 6n);
  assert.equal(st.frozen, true);
  assert.ok(st.firedTotal >= 9n);
  // camelCase like every other result, not the wire's snake_case.
  assert.equal(st.backlogEvents, 0n);
  assert.equal(st.tickNs, 10_000_000n);
  assert.ok(!Object.keys(st).some((k) => k.includes("_")), `snake_case keys: ${Object.keys(st).join(" ")}`);
  await admin.cancelAll(1);
  await admin.cancelAll(2);
});

test("the seed example's firing table", async () => {
  // 001_d5a833dbdee2ccaf.txt: tid 12 every tick x5, tid 11 every 3 ticks x4,
  // tid 20 every 3 ticks forever, from tick T.
  const c = await dial("seed");
  const r = new Reader(c);
  await c.bind(100);
  const T = await c.ping();
  await c.add(100, 12, 1, { repeat: 5 });
  await c.add(100, 11, 3, { repeat: 4 });
  await c.add(100, 20, 3, { repeat: "forever" });
  const { fired } = await c.fastForward(12);
  const want: string[] = [];
  for (let k = 1n; k <= 12n; k++) {
    if (k <= 5n) want.push(`tick ${T + k}  100/12  fired ${k}/5${k === 5n ? "  last" : ""}`);
    if (k % 3n === 0n) {
      want.push(`tick ${T + k}  100/11  fired ${k / 3n}/4${k === 12n ? "  last" : ""}`);
      want.push(`tick ${T + k}  100/20  fired ${k / 3n}/forever`);
    }
  }
  assert.equal(fired, BigInt(want.length));
  assert.deepEqual((await r.take(want.length)).map(line), want);
  assert.deepEqual((await c.list(100)).map((t) => t.tid), [20n], "12 and 11 ran out; 20 goes on");
  await c.cancel(100, 20);
  await r.none();
});

test("zero and past delays fire at the next tick", async () => {
  // (invalid_argument before zero delays)
  const c = await dial("soonest");
  const r = new Reader(c);
  await c.bind(8);
  const now = await c.ping();
  assert.equal(await c.add(8, 1, 0), now + 1n);
  assert.equal(await c.addAt(8, 2, now - 30n), now + 1n);
  assert.equal(await c.addAt(8, 3, now), now + 1n);
  assert.equal(await c.addAfter(8, 4, 0), now + 1n);
  assert.equal(await c.addAfter(8, 5, -2500), now + 1n, "a deadline 2.5 s ago");
  await rejectsWith(c.add(8, 6, (1n << 64n) - 1n), "invalid_argument");
  await assert.rejects(c.addAfter(8, 6, NaN), RangeError);
  await c.fastForward(1);
  const evs = (await r.take(5)) as FireEvent[];
  assert.deepEqual(evs.map((e) => [e.tid, e.tick, e.late]), [
    [1n, now + 1n, 0n], [2n, now + 1n, 30n], [3n, now + 1n, 0n], [4n, now + 1n, 0n], [5n, now + 1n, 0n],
  ]);
  await r.none();
});

test("errors for bad input", async () => {
  const c = await dial("errors");
  const user = await dial("user", "");
  await rejectsWith(c.get(7, 1), "not_found");
  await rejectsWith(c.cancel(7, 1), "not_found");
  await c.add(7, 1, 10);
  await rejectsWith(c.add(7, 1, 10), "exists");
  await c.add(7, 1, 20, { replace: true });
  await rejectsWith(c.add(7, 2, (1n << 64n) - 1n), "invalid_argument");
  await c.pause(7, 1);
  await rejectsWith(c.pause(7, 1), "bad_state");
  await c.resume(7, 1);
  await rejectsWith(c.resume(7, 1), "bad_state");
  await rejectsWith(c.add(7, 3, 1, { data: new Uint8Array(Number(c.limits.max_data) + 1) }), "limit_exceeded");
  await rejectsWith(c.setSpeed(0), "invalid_argument");
  await rejectsWith(c.fastForward((1n << 64n) - 1n), "invalid_argument");
  await rejectsWith(c.unbind(12345), "not_found");
  await rejectsWith(user.stats(), "unauthorized");
  await rejectsWith(user.fastForward(1), "unauthorized");
  await rejectsWith(connect(srv.addr, { token: "wrong" }), "unauthorized");
  await assert.rejects(c.add(7, 4, 1, { repeat: 2 ** 32 }), RangeError);
  await assert.rejects(c.add(-1, 4, 1), RangeError);
  await assert.rejects(c.add(2 ** 53, 4, 1), RangeError, "numbers past 2^53 are not exact: pass a bigint");
  // Bad arguments are RangeErrors before anything is sent, never wrapped or misread on the wire.
  await assert.rejects(c.addAfter(7, 4, 2e13), RangeError, "2e13 ms is past 2^64-1 ns: it wrapped");
  await assert.rejects(c.addAfter(7, 4, 1e30), RangeError);
  await assert.rejects(c.addSchedule(7, 4, ""), RangeError, "an empty schedule is a plain add");
  await assert.rejects(c.add(7, 4, 1, { repeat: 2, missed: "never" as "skip" }), RangeError);
  await assert.rejects(c.add(7, 4, 1, { data: 42 as unknown as string }), RangeError, "data of another type was sent as none");
  await assert.rejects(connect("127.0.0.1:abc"), RangeError, "a port that is not a number");
  await assert.rejects(connect("127.0.0.1:70000"), RangeError);
  await assert.rejects(connect(srv.addr, { reconnect: { minMs: 0 } }), RangeError, "minMs 0 retried in a tight loop");
  await assert.rejects(connect(srv.addr, { reconnect: { minMs: 500, maxMs: 100 } }), RangeError);
  await assert.rejects(c.get(7, 4), (err: unknown) => err instanceof TickwheelError && err.code === "not_found", "a bad argument added a timer");
  // uint64 ids are exact as bigints.
  const big = (1n << 64n) - 1n;
  await c.add(big, big - 1n, 5, { data: "x" });
  const t = await c.get(big, big - 1n);
  assert.deepEqual([t.receiver, t.tid], [big, big - 1n]);
  assert.equal(await c.cancelAll(big), 1n);
  assert.equal(await c.cancelAll(7), 1n);
  // The connection survived every error reply.
  await c.ping();
});

test("pipelining: many calls in flight on one connection", async () => {
  const c = await dial("pipeline");
  const now = await c.ping();
  const dues = await Promise.all(Array.from({ length: 2000 }, (_, i) => c.add(200, i + 1, i + 1)));
  assert.deepEqual(dues, Array.from({ length: 2000 }, (_, i) => now + BigInt(i + 1)));
  const page = await c.listPage(200, 0, 10);
  assert.equal(page.timers.length, 10);
  assert.equal(page.next, 11n);
  assert.equal((await c.list(200)).length, 2000);
  assert.equal(await c.cancelAll(200), 2000n);
});

test("AbortSignal", async () => {
  const c = await dial("abort");
  const ac = new AbortController();
  ac.abort(new Error("stop"));
  await assert.rejects(c.ping({ signal: ac.signal }), /stop/);
  const ac2 = new AbortController();
  const p = c.ping({ signal: ac2.signal }); // sent: its reply will be read and dropped
  ac2.abort(new Error("late"));
  await assert.rejects(p, /late/);
  await c.ping({ signal: AbortSignal.timeout(5000) }); // a live signal changes nothing
});

test("connect's signal bounds the hello too, and an aborted one never dials", { timeout: 5000 }, async () => {
  // A listener that accepts and never answers (not a tickwheel, or one that hangs).
  const silent = createServer((s) => s.on("error", () => {}));
  let accepted = 0;
  silent.on("connection", () => accepted++);
  silent.listen(0, "127.0.0.1");
  await once(silent, "listening");
  const addr = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
  try {
    const ac = new AbortController();
    const p = connect(addr, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("gave up")), 100);
    await assert.rejects(p, /gave up/);
    await assert.rejects(connect(addr, { signal: AbortSignal.abort(new Error("already")) }), /already/);
    assert.equal(accepted, 1, "an aborted signal dialed");
  } finally {
    silent.close();
  }
});

test("reconnect: calls wait, receivers are bound again, acknowledged events survive", async () => {
  const relay = await Relay.start(srv.addr);
  try {
    const admin = await dial("admin-rc");
    const c = await dial("rc", "", relay.addr, { reconnect: { minMs: 10, maxMs: 50 } });
    const r = new Reader(c);
    let disconnects = 0;
    c.on("disconnect", () => disconnects++);
    await c.bind(300, { ack: "auto" });
    await c.bind(301);
    for (let i = 1; i <= 5; i++) await admin.add(300, i, i);
    await admin.add(301, 1, 1, { repeat: "forever" });
    await admin.fastForward(2);
    const first = await r.take(4); // 300/1 301/1, 300/2 301/1
    assert.equal(first.filter((e) => e.receiver === 300n).length, 2);
    const session = c.session;

    const gone = once(c, "disconnect");
    assert.equal(relay.cut(), 1);
    await gone;
    // A call made while the connection is down waits for the new one.
    assert.ok((await c.ping()) > 0n);
    assert.equal(disconnects, 1);
    assert.notEqual(c.session, session, "a new session");
    await admin.fastForward(3); // 300/3..5 fire; 301/1 three times
    const evs = (await r.take(6)) as FireEvent[];
    const of300 = evs.filter((e) => e.receiver === 300n).map((e) => e.tid);
    assert.deepEqual(of300, [3n, 4n, 5n], "acknowledged: every event once, in order, none again");
    assert.equal(evs.filter((e) => e.kind === "fire" && e.receiver === 301n).length, 3, "301 was bound again");
    await r.none();
    await admin.cancelAll(301);
  } finally {
    await relay.stop();
  }
});

test("a change whose reply the connection lost is sent again with its request id and applied once", async () => {
  // A single server remembers request ids only when told to (a cluster node does by default).
  const own = await startServer(["-frozen", "-start-tick", "1000", "-max-request-ids", "100000"]);
  const relay = await Relay.start(own.addr);
  try {
    const admin = await dial("admin-retry", ADMIN_TOKEN, own.addr);
    const c = await dial("retry", ADMIN_TOKEN, relay.addr, { reconnect: { minMs: 10, maxMs: 50 } });
    assert.ok((c.limits.request_id_ticks ?? 0n) > 0n, "the server remembers request ids");
    const lostReply = async <T>(call: () => Promise<T>, applied: () => Promise<boolean>): Promise<T> => {
      relay.holdReplies(true);
      const p = call();
      while (!(await applied())) await new Promise((r) => setTimeout(r, 5));
      relay.holdReplies(false);
      assert.equal(relay.cut(), 1); // the server applied it; the client never saw the reply
      return p;
    };
    const now = await admin.ping(); // (frozen)
    const due = await lostReply(() => c.add(4400, 1, 50, { group: 44 }), async () => (await admin.list(4400)).length === 1);
    assert.equal(due, now + 50n, "the first add's reply, not exists");
    await admin.add(4400, 2, 60, { group: 44 });
    const paused = await lostReply(() => c.pauseAll(4400), async () => (await admin.list(4400)).every((t) => t.paused));
    assert.equal(paused, 2n, "the first pause_all's count, not 0");
    const resumed = await lostReply(() => c.resumeGroup(44), async () => (await admin.list(4400)).every((t) => !t.paused));
    assert.equal(resumed, 2n, "the first resume_all's count, not 0");
    const cancelled = await lostReply(() => c.cancelGroup(44), async () => (await admin.list(4400)).length === 0);
    assert.equal(cancelled, 2n, "the first cancel_group's count, not 0");
    await admin.add(4400, 1, 50);
    await admin.add(4400, 2, 60);
    const n = await lostReply(() => c.cancelAll(4400), async () => (await admin.list(4400)).length === 0);
    assert.equal(n, 2n, "the first cancel_all's count, not 0");
    assert.deepEqual(await admin.list(4400), []);
  } finally {
    await relay.stop();
    await own.stop();
  }
});

test("acknowledged mode, manual: unacked events come again to the next binder", async () => {
  const admin = await dial("admin-ack");
  const a = await dial("ack-a", "");
  const ra = new Reader(a);
  await a.bind(400, { ack: "manual" });
  for (let i = 1; i <= 4; i++) await admin.add(400, i, 1);
  await admin.fastForward(1);
  const evs = (await ra.take(4)) as FireEvent[];
  const s0 = evs[0].seq; // a bind in acknowledged mode starts past any seq used before
  assert.deepEqual(evs.map((e) => e.seq), [s0, s0 + 1n, s0 + 2n, s0 + 3n]);
  a.ack(400, s0 + 1n);
  await a.ping(); // the ack went out before
  await new Promise((r) => setTimeout(r, 20));
  await a.close();
  await assert.rejects(a.ping(), ClosedError);

  const b = await dial("ack-b", "");
  const rb = new Reader(b);
  const res = await b.bind(400, { ack: "auto" });
  assert.equal(res.firstSeq, s0 + 2n);
  assert.equal(res.pending, 2n);
  assert.deepEqual(((await rb.take(2)) as FireEvent[]).map((e) => [e.seq, e.tid]), [[s0 + 2n, 3n], [s0 + 3n, 4n]]);
  await rb.none();
});

test("takeover: another session binds the receiver", async () => {
  const a = await dial("take-a", "");
  const b = await dial("take-b", "");
  const ra = new Reader(a);
  await a.bind(500);
  await b.bind(500);
  const [ev] = await ra.take(1);
  assert.deepEqual(ev, { kind: "takeover", receiver: 500n, session: b.session });
});

test("onEvent handler: events in order, one at a time", async () => {
  const got: string[] = [];
  let busy = false;
  const c = await dial("handler", ADMIN_TOKEN, srv.addr, {
    onEvent: async (ev: Event) => {
      assert.equal(busy, false, "one event at a time");
      busy = true;
      await new Promise((r) => setTimeout(r, 1));
      got.push(line(ev));
      busy = false;
    },
  });
  await c.bind(600, { ack: "auto" });
  const T = await c.ping();
  await c.add(600, 1, 1, { repeat: 3 });
  await c.fastForward(3);
  for (let i = 0; i < 100 && got.length < 3; i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(got, [1n, 2n, 3n].map((k) => `tick ${T + k}  600/1  fired ${k}/3${k === 3n ? "  last" : ""}`));
  assert.throws(() => c.events(), /onEvent/);
});

test("acknowledged mode, auto: close sends the acks of the events finished, not of the one in hand", async () => {
  const admin = await dial("admin-auto");
  const a = await connect(srv.addr, { name: "auto-a" });
  const ra = new Reader(a);
  await a.bind(700, { ack: "auto" });
  for (let i = 1; i <= 3; i++) await admin.add(700, i, 1);
  await admin.fastForward(1);
  const evs = (await ra.take(3)) as FireEvent[]; // the third is still in hand
  await a.close();
  const b = await dial("auto-b", "");
  const res = await b.bind(700, { ack: "auto" });
  assert.deepEqual([res.firstSeq, res.pending], [evs[2].seq, 1n]);
});

test("addAfter counts from the server's read (after_ns); addSchedule fires on tw-time's calendar", async () => {
  const c = await dial("time");
  const r = new Reader(c);
  await c.bind(60);
  const now = await c.ping();
  // The server starts frozen on a tick boundary: 25 ms with 10 ms ticks is due in 3 ticks.
  assert.equal(await c.addAfter(60, 1, 25), now + 3n);
  assert.equal(await c.addAfter(60, 2, 0), now + 1n, "a zero duration: the next tick");
  await c.cancel(60, 2);
  await assert.rejects(c.addAfter(60, 2, NaN), RangeError);

  // A daily reset at 04:00 Paris time: two days of tw-time fire it twice.
  const due = await c.addSchedule(60, 3, "0 4 * * *", { zone: "Europe/Paris", missed: "once" });
  const t = await c.get(60, 3);
  assert.deepEqual([t.schedule, t.zone, t.missed, t.due, t.repeat], ["0 4 * * *", "Europe/Paris", "once", due, "forever"]);
  const day = 86_400_000_000_000n / c.tickNs;
  const ff = await c.fastForward(due - (await c.ping()) + 2n * day - 1n);
  assert.equal(ff.fired, 3n); // the after_ns timer, and the reset twice
  const evs = await r.take(3);
  assert.deepEqual(evs.map((e) => [(e as FireEvent).tid, (e as FireEvent).fired]), [[1n, 1n], [3n, 1n], [3n, 2n]]);
  await rejectsWith(c.addSchedule(60, 4, "0 25 * * *"), "invalid_argument");
  await c.cancelAll(60);
});
