// The protocol test vectors (protocol/testdata/vectors.json and
// vectors-edge.json, generated from the Go encoders): this client's encoder
// must make every request's bytes, and its decoder read every server
// message to its meaning. The edge file holds the edge values: the largest
// uint64s, max_data-sized data, every cron form, zero and past delays.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  FrameSplitter, codeName as codeNameOf, decodeHello, decodeListGroupPage, decodeListPage, decodeMessage, decodeCluster, decodeStats, decodeTimer, decodeUints,
  Missed, NOT_LEADER, encodeRequest, type Request, type Timer,
} from "../src/index.js";

interface Vector {
  name: string;
  hex: string;
  meaning: Record<string, any>;
}

const load = (name: string) => JSON.parse(readFileSync(new URL(`../../../../protocol/testdata/${name}`, import.meta.url), "utf8"));
const file = load("vectors.json");
const edge = load("vectors-edge.json");

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "hex"));

/** j renders a uint as the vectors do: a number up to 2^53-1, else a decimal string. */
const j = (v: bigint): number | string => (v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString());
/** jrepeat renders a decoded repeat as the wire has it: "forever" is 0. */
const jrepeat = (v: bigint | "forever"): number | string => j(v === "forever" ? 0n : v);
const jdata = (d: Uint8Array | null): string | null => (d && d.length > 0 ? hex(d) : null);

const argNames: Record<string, keyof Request> = {
  version: "version", name: "name", token: "token", receiver: "receiver", tid: "tid", after: "after", at: "at",
  every: "every", repeat: "repeat", data: "data", replace: "replace", after_ns: "afterNs", schedule: "schedule", client: "client",
  zone: "zone", missed: "missed", ephemeral: "ephemeral", ack: "ack", from_tid: "fromTid", limit: "limit",
  seq: "seq", ticks: "ticks", speed: "speed", command: "command", node: "node", addr: "addr",
  group: "group", from_receiver: "fromReceiver",
};

function requestOf(m: Record<string, any>): Request {
  const r: Record<string, unknown> = { op: m.op_code, id: BigInt(m.id) };
  for (const [k, v] of Object.entries(m.args as Record<string, unknown>)) {
    const name = argNames[k];
    assert.ok(name, `unknown arg ${k}`);
    if (k === "data") r[name] = v === null ? null : unhex(v as string);
    else if (typeof v === "number" && k !== "speed") r[name] = BigInt(v);
    else if (typeof v === "string" && /^[0-9]+$/.test(v) && !["name", "token", "schedule", "zone", "command", "node", "addr"].includes(k)) r[name] = BigInt(v);
    else r[name] = v;
  }
  return r as unknown as Request;
}

function timerMeaning(t: Timer): Record<string, unknown> {
  return {
    receiver: j(t.receiver), tid: j(t.tid), due: j(t.due), remaining: j(t.remaining), every: j(t.every),
    fired: j(t.fired), repeat: jrepeat(t.repeat), paused: t.paused, data: jdata(t.data),
    schedule: t.schedule, zone: t.zone, missed: j(BigInt(Missed[t.missed])), group: j(t.group),
  };
}

const uintResults: Record<string, string[]> = {
  bind: ["delivered", "dropped", "first_seq"], unbind: [], add: ["due"], cancel: [], cancel_all: ["count"],
  pause: [], resume: [], ping: ["now"], ack: [], fast_forward: ["now", "fired"], freeze: ["now"],
  resume_sync: ["now"], set_speed: ["now"], pause_all: ["count"], resume_all: ["count"], cancel_group: ["count"],
};

function resultMeaning(op: string, result: unknown[]): Record<string, unknown> {
  switch (op) {
    case "hello": {
      const h = decodeHello(result);
      const limits: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(h.limits)) limits[k] = j(v);
      return { session: j(h.session), now: j(h.now), tick_ns: j(h.tickNs), server_version: h.serverVersion, limits };
    }
    case "get":
      return { timer: timerMeaning(decodeTimer(result[0])) };
    case "list": {
      const p = decodeListPage(result);
      return { timers: p.timers.map(timerMeaning), next: j(p.next) };
    }
    case "list_group": {
      const p = decodeListGroupPage(result);
      return { timers: p.timers.map(timerMeaning), next_receiver: j(p.nextReceiver), next_tid: j(p.nextTid) };
    }
    case "stats": {
      const s = decodeStats(result);
      const out: Record<string, unknown> = {};
      // The result's keys are camelCase, the vectors' the wire's snake_case.
      for (const [k, v] of Object.entries(s)) out[k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase())] = typeof v === "bigint" ? j(v) : v;
      return { stats: out };
    }
    case "cluster": {
      const c = decodeCluster(result);
      return {
        cluster: {
          role: c.role, leader: c.leader, term: j(c.term), commit_index: j(c.commitIndex), applied_index: j(c.appliedIndex),
          members: c.members.map((m) => ({ id: m.id, raft_addr: m.raftAddr, voter: m.voter })),
        },
      };
    }
  }
  const names = uintResults[op];
  assert.ok(names, `no result shape for ${op}`);
  const vals = decodeUints(result, names.length, op);
  return Object.fromEntries(names.map((n, i) => [n, j(vals[i])]));
}

function messageMeaning(payload: Uint8Array, op: string): Record<string, unknown> {
  const m = decodeMessage(payload);
  switch (m.kind) {
    case "ok":
      return { kind: "ok", id: j(m.id), op, result: resultMeaning(op, m.result) };
    case "error":
    {
      const e: Record<string, unknown> = { kind: "error", id: j(m.id), code: m.code, code_name: codeNameOf(m.code), message: m.message };
      if (m.code === NOT_LEADER) e.leader = m.leader;
      return e;
    }
    case "fire":
      return {
        kind: "fire", receiver: j(m.receiver), tid: j(m.tid), tick: j(m.tick), fired: j(m.fired), repeat: jrepeat(m.repeat),
        last: m.last, data: jdata(m.data), seq: j(m.seq), late: j(m.late),
      };
    case "takeover":
      return { kind: "takeover", receiver: j(m.receiver), session: j(m.session) };
    case "dropped":
      return { kind: "dropped", receiver: j(m.receiver), first_seq: j(m.firstSeq), last_seq: j(m.lastSeq) };
  }
  return { kind: "unknown", kind_code: m.kindCode };
}

function payloadOf(h: string): Uint8Array {
  const s = new FrameSplitter(1 << 30);
  s.push(unhex(h));
  const p = s.next();
  assert.ok(p, "a whole frame");
  assert.equal(s.next(), null, "one frame per vector");
  return p;
}

test("vectors file version", () => {
  assert.equal(file.version, 1);
  assert.equal(file.protocol, 1);
});

test("requests encode to the vectors' bytes", () => {
  assert.ok(file.requests.length >= 17);
  for (const v of file.requests as Vector[]) {
    assert.equal(hex(encodeRequest(requestOf(v.meaning))), v.hex, v.name);
  }
});

test("server messages decode to the vectors' meaning", () => {
  const groups: Vector[] = [...file.replies, ...file.events, ...file.errors, ...file.accept];
  assert.ok(groups.length > 30);
  for (const v of groups) {
    assert.deepEqual(messageMeaning(payloadOf(v.hex), v.meaning.op ?? ""), v.meaning, v.name);
  }
});

test("edge vectors: requests encode, messages decode", () => {
  assert.equal(edge.version, 1);
  assert.equal(edge.protocol, 1);
  assert.ok(edge.requests.length >= 40);
  for (const v of edge.requests as Vector[]) {
    assert.equal(hex(encodeRequest(requestOf(v.meaning))), v.hex, v.name);
  }
  const msgs: Vector[] = [...edge.replies, ...edge.events, ...edge.errors];
  assert.ok(msgs.length >= 20);
  for (const v of msgs) {
    assert.deepEqual(messageMeaning(payloadOf(v.hex), v.meaning.op ?? ""), v.meaning, v.name);
  }
});

test("every error code has a name", () => {
  for (const v of file.errors as Vector[]) assert.equal(codeNameOf(v.meaning.code), v.meaning.code_name);
});

test("frames split at any byte boundary decode the same", () => {
  const all: Vector[] = [...file.replies, ...file.events, ...file.errors];
  const stream = Buffer.concat(all.map((v) => Buffer.from(v.hex, "hex")));
  for (let seed = 1; seed <= 50; seed++) {
    const s = new FrameSplitter(1 << 20);
    let rnd = seed;
    const got: string[] = [];
    for (let i = 0; i < stream.length;) {
      rnd = (rnd * 1103515245 + 12345) & 0x7fffffff;
      const n = 1 + (rnd % 40);
      s.push(new Uint8Array(stream.subarray(i, i + n)));
      i += n;
      for (let p = s.next(); p; p = s.next()) got.push(hex(p));
    }
    assert.deepEqual(got, all.map((v) => v.hex.slice(8)), `seed ${seed}`);
  }
});

test("frame errors", () => {
  const s = new FrameSplitter(16);
  s.push(unhex("00000000"));
  assert.throws(() => s.next(), /empty frame/);
  const t = new FrameSplitter(16);
  t.push(unhex("00000011"));
  assert.throws(() => t.next(), /more than 16/);
});
