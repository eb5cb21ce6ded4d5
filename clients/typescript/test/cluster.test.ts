// Several addresses, against fake cluster nodes (node:net listeners that
// answer "not_leader" as a follower does) in front of the real server: no
// real cluster needed.
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { decode, encode } from "@msgpack/msgpack";

import { ConnectError, DisconnectedError, TickwheelError, connect, type Client, type FireEvent } from "../src/index.js";
import { ADMIN_TOKEN, Reader, startServer, type RunningServer } from "../testkit/server.js";

const vectors = JSON.parse(readFileSync(new URL("../../../../protocol/testdata/vectors.json", import.meta.url), "utf8"));
/** A hello reply with id 1: a Conn's first request is its hello, id 1. Its limits say the server remembers request ids. */
const helloOK = Buffer.from(vectors.replies.find((v: { name: string }) => v.name === "ok-hello").hex, "hex");
/** The hello reply of a server that predates request ids: no request_id_ticks in its limits. */
const helloOKNoIDs = frame([0, 1, [5, 1000, 10_000_000, "0.1.0", { max_frame: 65536 }]]);

let srv: RunningServer;
const clients: Client[] = [];
const fakes: Server[] = [];

before(async () => {
  // The leader the fake followers name: it remembers request ids, as a cluster node does by default.
  srv = await startServer(["-frozen", "-start-tick", "1000", "-max-request-ids", "100000"]);
});

after(async () => {
  for (const c of clients) await c.close();
  for (const f of fakes) f.close();
  await srv.stop();
});

/** frame wraps a msgpack value in a frame. */
function frame(v: unknown): Buffer {
  const p = encode(v);
  const b = Buffer.alloc(4 + p.length);
  b.writeUInt32BE(p.length, 0);
  b.set(p, 4);
  return b;
}

/** A fake node: it accepts `helloOK` hellos, then answers every request with not_leader naming leader(n) and closes. */
interface Fake {
  addr: string;
  refused: number;
}

async function fakeNode(leader: (n: number) => string, helloOKs = 0, port = 0, hello: Uint8Array = helloOK): Promise<Fake> {
  const f: Fake = { addr: "", refused: 0 };
  const server = createServer((s: Socket) => {
    s.on("error", () => {});
    let buf = Buffer.alloc(0);
    s.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        const n = buf.readUInt32BE(0);
        const req = decode(buf.subarray(4, 4 + n)) as unknown[];
        buf = buf.subarray(4 + n);
        if (req[0] === 1 && helloOKs > 0) {
          helloOKs--;
          s.write(hello);
          continue;
        }
        s.end(frame([1, req[1], 14, "this node is a follower", leader(f.refused++)]));
        return;
      }
    });
  });
  server.listen(port, "127.0.0.1");
  await once(server, "listening");
  fakes.push(server);
  f.addr = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return f;
}

async function dial(addr: string, extra = {}): Promise<Client> {
  const c = await connect(addr, { token: ADMIN_TOKEN, ...extra });
  clients.push(c);
  return c;
}

async function rejectsNotLeader(p: Promise<unknown>, re: RegExp): Promise<TickwheelError> {
  let got: TickwheelError | undefined;
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof TickwheelError, `want a TickwheelError, got ${String(err)}`);
    assert.equal(err.code, "not_leader");
    assert.match(err.message, re);
    got = err;
    return true;
  });
  return got!;
}

test("a follower's not_leader is followed to the leader it names", async () => {
  const f = await fakeNode(() => srv.addr);
  for (const [addr, extra] of [[`${f.addr},${srv.addr}`, {}], [f.addr, {}], ["", { addrs: [f.addr, srv.addr] }]] as const) {
    const before = f.refused;
    const c = await dial(addr, extra);
    assert.equal(c.addr, srv.addr);
    assert.equal(f.refused, before + 1, "the follower was asked first");
    assert.equal(await c.ping(), 1000n);
  }
});

test("a follower that knows no leader sends the client on to the next address", async () => {
  const f = await fakeNode(() => "");
  const c = await dial(`${f.addr},${srv.addr}`);
  assert.equal(c.addr, srv.addr);
  assert.equal(f.refused, 1);
});

test("nodes naming each other: an error after leaderHops redirections", async () => {
  let a!: Fake, b!: Fake;
  a = await fakeNode(() => b.addr);
  b = await fakeNode(() => a.addr);
  const t0 = Date.now();
  await assert.rejects(dial(`${a.addr},${b.addr}`), (err: unknown) => {
    assert.ok(err instanceof ConnectError, String(err));
    assert.deepEqual(err.addrs, [a.addr, b.addr]);
    assert.ok(err.errors.every((e) => e instanceof TickwheelError && e.code === "not_leader"));
    assert.match(err.message, new RegExp(`followed not_leader 3 times \\(${a.addr} -> ${b.addr} -> ${a.addr} -> ${b.addr}, which names ${a.addr}\\)`));
    return true;
  });
  assert.ok(Date.now() - t0 < 3000);
  assert.equal(a.refused + b.refused, 8);
  await rejectsNotLeader(dial(a.addr, { leaderHops: 1 }), /followed not_leader 1 times/);
});

test("connect tries again while no node knows a leader", async () => {
  const f = await fakeNode((n) => (n < 3 ? "" : srv.addr));
  const c = await dial(f.addr, { reconnect: { minMs: 5, maxMs: 20 } });
  assert.equal(c.addr, srv.addr);
  assert.equal(f.refused, 4);
  const none = await fakeNode(() => "");
  const t0 = Date.now();
  await rejectsNotLeader(dial(none.addr, { reconnect: { minMs: 5, maxMs: 20 }, dialTimeoutMs: 300 }), /leader unknown/);
  assert.ok(Date.now() - t0 < 3000);
  assert.ok(none.refused > 2, "tried again");
});

test("a node that steps down: reads go again to the leader, and changes, with a request id", async () => {
  const a = await fakeNode(() => srv.addr, 1);
  const c = await dial(a.addr, { reconnect: { minMs: 5, maxMs: 5 } });
  assert.equal(c.addr, a.addr);
  await assert.rejects(c.get(1, 1), (err: unknown) => err instanceof TickwheelError && err.code === "not_found");
  assert.equal(c.addr, srv.addr, "answered by the real server");

  // A node that remembers request ids (its hello says so): the add goes to
  // the leader with the same request id, and the caller sees its reply.
  const now = await c.ping();
  const e = await fakeNode(() => srv.addr, 1);
  const g = await dial(e.addr, { reconnect: { minMs: 5, maxMs: 5 } });
  assert.equal(await g.add(1, 2, 100), now + 100n, "sent again to the leader");
  assert.equal(g.addr, srv.addr);
  assert.equal(e.refused, 1);
  await g.cancel(1, 2);

  // A node that remembers request ids naming a leader that does not (a
  // single server, or limits.max_request_ids changed on one node): the add
  // may have been applied, and a retry there could apply it twice, so it
  // rejects with DisconnectedError. (Before, the client sent it again at
  // once, forever, at 100% CPU.)
  const plain = await startServer();
  try {
    const h = await fakeNode(() => plain.addr, 1);
    const k = await dial(h.addr, { reconnect: { minMs: 5, maxMs: 5 } });
    await assert.rejects(k.add(1, 3, 100), (err: unknown) => err instanceof DisconnectedError && /does not deduplicate/.test(err.message));
    assert.equal(k.addr, plain.addr);
    assert.deepEqual(await k.list(1), [], "not applied: the fake refused it and it was not sent again");
  } finally {
    await plain.stop();
  }

  // A node that does not: the add rejects with not_leader (it may have
  // been applied; the caller decides).
  const b = await fakeNode(() => srv.addr, 1, 0, helloOKNoIDs);
  const d = await dial(b.addr, { reconnect: { minMs: 5, maxMs: 5 } });
  const err = await rejectsNotLeader(d.add(1, 1, 100), new RegExp(`\\(leader ${srv.addr}\\)`));
  assert.equal(err.op, "add");
  assert.equal(err.leader, srv.addr);
  assert.equal(await d.add(1, 1, 100), 1100n, "the caller retries on the leader");
  assert.equal(d.addr, srv.addr);
  assert.equal(b.refused, 1, "the reconnect went to the leader named, not back to b");
  await d.cancel(1, 1);
});

/** freePort returns a port free now, for a server started later. */
async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

test("failover: re-bound on the new leader, unacknowledged events come from there", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tickwheel-ts-cluster-"));
  const [pa, pb] = [await freePort(), await freePort()];
  const A = `127.0.0.1:${pa}`, B = `127.0.0.1:${pb}`;
  const args = (addr: string): string[] => ["-frozen", "-start-tick", "1000", "-addr", addr, "-data-dir", dir, "-fsync", "always"];
  const srvA = await startServer(args(A));
  let srvB: RunningServer | undefined;
  try {
    const c = await dial(`${A},${B}`, { reconnect: { minMs: 5, maxMs: 20 } });
    const r = new Reader(c);
    assert.equal((await c.bind(1, { ack: "manual" })).firstSeq, 1n);
    await c.add(1, 1, 1, { repeat: 3 });
    await c.fastForward(2);
    assert.deepEqual(((await r.take(2)) as FireEvent[]).map((e) => e.seq), [1n, 2n]);
    c.ack(1, 1);
    await c.ping();
    await new Promise((res) => setTimeout(res, 20)); // the ack went out (batched)
    await c.ping();

    const reconnected = once(c, "connect");
    await srvA.stop();
    await fakeNode(() => B, 0, pa); // the old leader's address: a follower now
    srvB = await startServer(args(B));
    await reconnected;
    await c.fastForward(1);
    const ev = ((await r.take(1)) as FireEvent[])[0];
    assert.equal(ev.seq, 3n, "seq 2 came again and was dropped as a duplicate");
    assert.equal(c.redelivered, 1n);
    assert.equal(c.addr, B);
    c.ack(1, 3);
    await r.none();

    const other = await dial(A); // only the old address: it finds the leader too
    assert.equal(other.addr, B);
  } finally {
    for (const cl of clients.splice(0)) await cl.close();
    await srvA.stop();
    await srvB?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("cluster status, add, add as a non-voter, promote and remove against real cluster nodes; a single server answers bad_state", { timeout: 60000 }, async () => {
  await assert.rejects((await dial(srv.addr)).clusterStatus(), (err: unknown) => err instanceof TickwheelError && err.code === "bad_state");

  const dirs = ["n1", "n2", "n3"].map((n) => mkdtempSync(join(tmpdir(), `tickwheel-ts-${n}-`)));
  const [c1, r1, c2, r2, c3, r3] = (await Promise.all([1, 2, 3, 4, 5, 6].map(() => freePort()))).map((p) => `127.0.0.1:${p}`);
  const node = (id: string, client: string, dir: string, more: string[]): string[] =>
    ["-addr", client, "-data-dir", dir, "-cluster-id", "ts", "-node-id", id, ...more];
  const n1 = await startServer(node("n1", c1, dirs[0], ["-peers", `n1=${r1}=${c1}`]));
  let n2: RunningServer | undefined;
  let n3: RunningServer | undefined;
  try {
    const c = await dial(c1, { signal: AbortSignal.timeout(20000) }); // until n1 has elected itself
    const st = await c.clusterStatus();
    assert.equal(st.role, "leader");
    assert.equal(st.leader, "n1");
    assert.ok(st.term > 0n && st.commitIndex > 0n && st.appliedIndex > 0n, JSON.stringify(st, (_, v) => typeof v === "bigint" ? String(v) : v));
    assert.deepEqual(st.members, [{ id: "n1", raftAddr: r1, voter: true }]);
    assert.equal(st.check, 0n);
    const checked = await c.clusterCheck();
    assert.ok(checked.check > 0n, "a state check's id");
    assert.equal(checked.leader, "n1");

    n2 = await startServer(node("n2", c2, dirs[1], ["-raft-addr", r2])); // no peers: it waits to be added
    const added = await c.clusterAdd("n2", r2, { signal: AbortSignal.timeout(20000) });
    assert.deepEqual(added.members.map((m) => [m.id, m.raftAddr, m.voter]), [["n1", r1, true], ["n2", r2, true]]);
    assert.deepEqual((await c.clusterAdd("n2", r2)).members.length, 2, "adding it again changes nothing");
    await assert.rejects(c.clusterAdd("n2", r2, { nonvoter: true }),
      (err: unknown) => err instanceof TickwheelError && err.code === "bad_state", "a voter stays one");
    const removed = await c.clusterRemove("n2", { signal: AbortSignal.timeout(20000) });
    assert.deepEqual(removed.members, [{ id: "n1", raftAddr: r1, voter: true }]);
    assert.deepEqual((await c.clusterStatus()).members.map((m) => m.id), ["n1"]);

    // A read replica, then promoted.
    n3 = await startServer(node("n3", c3, dirs[2], ["-raft-addr", r3]));
    const replica = await c.clusterAdd("n3", r3, { nonvoter: true, signal: AbortSignal.timeout(20000) });
    assert.deepEqual(replica.members.map((m) => [m.id, m.voter]), [["n1", true], ["n3", false]]);
    const promoted = await c.clusterPromote("n3", { signal: AbortSignal.timeout(20000) });
    assert.deepEqual(promoted.members.map((m) => [m.id, m.voter]), [["n1", true], ["n3", true]]);
    await assert.rejects(c.clusterPromote("n9"), (err: unknown) => err instanceof TickwheelError && err.code === "bad_state");
  } finally {
    for (const cl of clients.splice(0)) await cl.close();
    await n2?.stop();
    await n3?.stop();
    await n1.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
});
