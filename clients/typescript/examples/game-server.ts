import { connect, TickwheelError, type AddOptions } from "@tickwheel/client";

// A zone server: receiver 7 is this zone. Its timers live in tickwheel, so
// they survive a restart of this process: a timer may still be running
// from an earlier run ("exists"), and events that fired while no process
// was bound come at bind. Acknowledged mode makes every event arrive until
// acknowledged: ack each one once handled, or it comes again at the next
// bind (the break below would otherwise leave the last one unacknowledged).
export async function runZone(addr: string, token: string, log = console.log) {
  const tw = await connect(addr, { name: "zone-7", token });
  await tw.bind(7, { ack: "manual" });

  // start adds a timer unless it runs already (from this run or an earlier one).
  const start = async (tid: number, ms: number, what: string, opts?: AddOptions) => {
    try {
      await tw.addAfter(7, tid, ms, opts);
    } catch (err) {
      if (!(err instanceof TickwheelError && err.code === "exists")) throw err;
      log(`${what} already running`);
    }
  };

  // Player 42 casts a spell: a 1.5 s cooldown, and 3 regen ticks a second apart.
  const cast = { player: 42, spell: "fireball" };
  await start(1001, 1500, "cooldown", { data: JSON.stringify(cast) });
  await start(1002, 1000, "regen", { repeat: 3, data: "regen:42" });
  await start(1001, 1500, "cooldown"); // the same tid again: "cooldown already running"

  const done = (async () => {
    for await (const ev of tw.events()) {
      if (ev.kind !== "fire") continue; // takeover or dropped: see the client docs
      const text = new TextDecoder().decode(ev.data ?? new Uint8Array());
      if (ev.tid === 1001n) log(`cooldown over: ${text}`);
      else log(`regen ${ev.fired}/${ev.repeat}${ev.last ? " (last)" : ""}`);
      tw.ack(7, ev.seq); // handled: the server forgets it
      if (ev.tid === 1002n && ev.last) break;
    }
  })();
  return { tw, done };
}

// node dist/examples/game-server.js [host:port]  (token in $TICKWHEEL_TOKEN)
if (import.meta.url === `file://${process.argv[1]}`) {
  const { tw, done } = await runZone(process.argv[2] ?? "127.0.0.1:7420", process.env.TICKWHEEL_TOKEN ?? "");
  await done;
  await tw.close(); // sends the acks due
}
