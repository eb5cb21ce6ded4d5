// Client throughput against a running server, the same measurements as
// loadtest/cmd/gobench does with the Go client (bench/run.sh runs both
// in one run, alternating):
//   adds/s:  n adds from `callers` concurrent callers sharing one client
//            (each with one add in flight, pipelined on one connection)
//   fires/s: n one-shot timers over 64 receivers, all due on one tick,
//            fast-forwarded over and every event read from events()
//            (timers added beforehand, not timed)
// node dist/bench/bench.js ADDR ADMIN_TOKEN [n] [callers] [ack]
import { connect, type Client } from "../src/index.js";

const [addr, token, nArg, callersArg, ackArg] = process.argv.slice(2);
if (!addr) {
  console.error("usage: node dist/bench/bench.js ADDR ADMIN_TOKEN [n=200000] [callers=128] [ack=none|auto]");
  process.exit(2);
}
const n = Number(nArg ?? 200000);
const callers = Number(callersArg ?? 128);
const ack = (ackArg ?? "none") as "none" | "auto";
const receivers = 64;

async function adds(c: Client, base: bigint): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: callers }, async () => {
    while (next < n) {
      const i = next++;
      await c.add(base + BigInt(i % 1024), BigInt(i + 1), 1_000_000);
    }
  }));
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  for (let r = 0; r < 1024; r++) await c.cancelAll(base + BigInt(r));
  return n / s;
}

async function fires(c: Client, base: bigint): Promise<number> {
  for (let r = 0; r < receivers; r++) await c.bind(base + BigInt(r), { ack });
  let next = 0;
  await Promise.all(Array.from({ length: callers }, async () => {
    while (next < n) {
      const i = next++;
      await c.add(base + BigInt(i % receivers), BigInt(i + 1), 1);
    }
  }));
  const it = c.events();
  const t0 = process.hrtime.bigint();
  const ff = c.fastForward(1);
  let got = 0;
  while (got < n) {
    const r = await it.next();
    if (r.done) throw new Error("events ended");
    if (r.value.kind === "fire") got++;
  }
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  await ff;
  for (let r = 0; r < receivers; r++) await c.unbind(base + BigInt(r));
  return n / s;
}

const c = await connect(addr, { token, name: "bench-ts", eventBuffer: 1 << 16 });
const base = 1_000_000_000n + BigInt(process.pid) * 10_000n;
const a = await adds(c, base);
const f = await fires(c, base + 5000n);
await c.close();
console.log(JSON.stringify({ client: "typescript", n, callers, ack, adds_per_s: Math.round(a), fires_per_s: Math.round(f) }));
