// TLS against the real server binary: certificates made by `tickwheel
// certs` (crypto/x509) in a temporary directory, a server with mTLS,
// and the client over node:tls.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { connect, type Client, type FireEvent } from "../src/index.js";
import { ADMIN_TOKEN, serverBinary, startServer, type RunningServer } from "../testkit/server.js";

let srv: RunningServer;
let dir: string;
const pem = (name: string): string => readFileSync(join(dir, name), "utf8");
const clients: Client[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "tickwheel-ts-tls-"));
  execFileSync(serverBinary(), ["certs", "-dir", join(dir, "c"), "-hosts", "localhost,127.0.0.1"]);
  dir = join(dir, "c");
  srv = await startServer(["-frozen", "-start-tick", "1000", "-tls-cert", join(dir, "server.pem"),
    "-tls-key", join(dir, "server.key"), "-tls-client-ca", join(dir, "ca.pem")]);
});

after(async () => {
  for (const c of clients) await c.close();
  await srv.stop();
  rmSync(join(dir, ".."), { recursive: true, force: true });
});

test("add and fire over TLS with a client certificate (mTLS)", async () => {
  const c = await connect(srv.addr, {
    name: "ts-tls", token: ADMIN_TOKEN, reconnect: false,
    tls: { ca: pem("ca.pem"), cert: pem("client.pem"), key: pem("client.key") },
  });
  clients.push(c);
  await c.bind(3);
  const due = await c.add(3, 1, 2, { data: "over tls" });
  const events = c.events()[Symbol.asyncIterator]();
  assert.deepEqual(await c.fastForward(2), { now: due, fired: 1n });
  const ev = (await events.next()).value as FireEvent;
  assert.equal(ev.tid, 1n);
  assert.equal(ev.tick, due);
  assert.equal(Buffer.from(ev.data!).toString(), "over tls");
});

test("TLS refusals are clear errors", async () => {
  const opts = { token: ADMIN_TOKEN, reconnect: false as const, dialTimeoutMs: 5000 };
  // No client certificate: the server (mTLS) refuses it.
  await assert.rejects(connect(srv.addr, { ...opts, tls: { ca: pem("ca.pem") } }), /requires a TLS client certificate/);
  // A CA that did not sign the server's certificate.
  await assert.rejects(connect(srv.addr, { ...opts, tls: { ca: pem("client.pem"), cert: pem("client.pem"), key: pem("client.key") } }),
    /TLS handshake with 127\.0\.0\.1:\d+: .*(certificate|issuer)/);
  // Plaintext to the TLS port: the server says so.
  await assert.rejects(connect(srv.addr, opts), /this port speaks TLS/);
});
