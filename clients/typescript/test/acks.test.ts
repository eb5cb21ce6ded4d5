import assert from "node:assert/strict";
import { test } from "node:test";

import { AckState } from "../src/acks.js";
import type { FireMessage } from "../src/protocol.js";

const fire = (seq: bigint, tid = 1n, tick = 100n + seq): FireMessage => ({
  kind: "fire", receiver: 1n, tid, tick, fired: 1n, repeat: 1n, last: true, data: null, seq, late: 0n,
});

test("AckState: redeliveries of delivered events are duplicates, new events are not", () => {
  const st = new AckState("auto");
  st.bound(10n);
  for (let s = 10n; s <= 14n; s++) assert.equal(st.fire(fire(s)), false);
  st.want = 12n;
  assert.equal(st.due(), 12n);
  st.sent = 12n;
  st.confirmed(12n);
  assert.equal(st.due(), 0n);
  // A reconnect: the server redelivers from 13.
  st.bound(13n);
  assert.equal(st.fire(fire(13n)), true);
  assert.equal(st.fire(fire(14n)), true);
  assert.equal(st.fire(fire(15n)), false);
  assert.equal(st.fire(fire(11n)), true, "at or below the confirmed ack");
  st.want = 15n;
  assert.equal(st.due(), 15n, "the redeliveries reached this connection: the ack can go");
});

test("AckState: an ack waits until its seq was seen on this connection", () => {
  const st = new AckState("manual");
  st.bound(1n);
  st.fire(fire(1n));
  st.fire(fire(2n));
  st.bound(1n); // reconnect before any ack
  st.want = 2n;
  assert.equal(st.due(), 0n, "nothing seen here yet");
  assert.equal(st.fire(fire(1n)), true);
  assert.equal(st.due(), 1n);
});

test("AckState: a server that lost its state numbers from 1 again: new events", () => {
  const st = new AckState("auto");
  st.bound(1n);
  for (let s = 1n; s <= 3n; s++) st.fire(fire(s));
  st.confirmed(3n);
  st.bound(1n); // first_seq at or below the confirmed ack: the state is gone
  assert.equal(st.fire(fire(1n, 9n)), false);
  assert.equal(st.fire(fire(2n, 9n)), false);
  // The same seq with another timer, tick or count is another event.
  assert.equal(st.fire(fire(2n, 8n)), false);
});
