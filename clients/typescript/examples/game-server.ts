import { connect, TickwheelError } from "@tickwheel/client";

// A zone server: receiver 7 is this zone. Its timers live in tickwheel, so
// they survive a restart of this process; acknowledged mode ("auto") makes
// every event arrive at least once, and the client drops redeliveries.
export async function runZone(addr: string, token: string, log = console.log) {
  const tw = await connect(addr, { name: "zone-7", token });
  await tw.bind(7, { ack: "auto" });

  // Player 42 casts a spell: a 1.5 s cooldown, and 3 regen ticks a second apart.
  const cast = { player: 42, spell: "fireball" };
  await tw.addAfter(7, 1001, 1500, { data: JSON.stringify(cast) });
  await tw.addAfter(7, 1002, 1000, { repeat: 3, data: "regen:42" });
  try {
    await tw.addAfter(7, 1001, 1500); // the same tid again
  } catch (err) {
    if (err instanceof TickwheelError && err.code === "exists") log("cooldown already running");
  }

  const done = (async () => {
    for await (const ev of tw.events()) {
      if (ev.kind !== "fire") continue; // takeover or dropped: see the client docs
      const text = new TextDecoder().decode(ev.data ?? new Uint8Array());
      if (ev.tid === 1001n) log(`cooldown over: ${text}`);
      else log(`regen ${ev.fired}/${ev.repeat}${ev.last ? " (last)" : ""}`);
      if (ev.tid === 1002n && ev.last) break;
    }
  })();
  return { tw, done };
}

// node dist/examples/game-server.js [host:port]  (token in $TICKWHEEL_TOKEN)
if (import.meta.url === `file://${process.argv[1]}`) {
  const { tw, done } = await runZone(process.argv[2] ?? "127.0.0.1:7420", process.env.TICKWHEEL_TOKEN ?? "");
  await done;
  await tw.close();
}
