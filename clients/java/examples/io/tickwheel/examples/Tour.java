package io.tickwheel.examples;

import io.tickwheel.client.AckMode;
import io.tickwheel.client.AddOptions;
import io.tickwheel.client.ClientOptions;
import io.tickwheel.client.Event;
import io.tickwheel.client.TickwheelClient;
import io.tickwheel.client.TickwheelException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.function.Consumer;

/**
 * A zone server: receiver 7 is this zone. Its timers live in tickwheel, so they survive a
 * restart of this process: a timer may still run from an earlier run (Exists), and events
 * that fired while no process was bound come at bind. Acknowledged mode makes every event
 * arrive until acknowledged: ack each one once handled, or it comes again at the next bind.
 */
public final class Tour {
  private Tour() {}

  /** run plays the zone until the last regen tick; log gets a line per event. */
  public static void run(String addr, String token, Consumer<String> log) throws InterruptedException {
    CountDownLatch lastRegen = new CountDownLatch(1);
    TickwheelClient[] self = new TickwheelClient[1];
    ClientOptions opts = new ClientOptions(addr).name("zone-7").token(token).listener(e -> {
      if (!(e instanceof Event.Fire f)) return; // takeover or dropped: see the README
      String text = f.data() == null ? "" : new String(f.data(), StandardCharsets.UTF_8);
      if (f.tid() == 1001) log.accept("cooldown over: " + text);
      else log.accept("regen " + f.fired() + "/" + f.repeat() + (f.last() ? " (last)" : ""));
      self[0].ack(7, f.seq()); // handled: the server forgets it
      if (f.tid() == 1002 && f.last()) lastRegen.countDown();
    });
    try (TickwheelClient tw = TickwheelClient.connect(opts)) {
      self[0] = tw;
      tw.bind(7, AckMode.MANUAL, false).join();
      // Player 42 casts a spell: a 1.5 s cooldown, and 3 regen ticks a second apart.
      start(tw, 1001, Duration.ofMillis(1500), "cooldown", AddOptions.defaults().data("{\"player\":42}"), log);
      start(tw, 1002, Duration.ofSeconds(1), "regen", AddOptions.repeat(3).data("regen:42"), log);
      start(tw, 1001, Duration.ofMillis(1500), "cooldown", AddOptions.defaults(), log); // "already running"
      lastRegen.await();
    } // close sends the acks due
  }

  /** start adds a timer unless it runs already (from this run or an earlier one). */
  private static void start(TickwheelClient tw, long tid, Duration d, String what, AddOptions o, Consumer<String> log) {
    try {
      tw.addAfter(7, tid, d, o).join();
    } catch (CompletionException e) {
      if (!(e.getCause() instanceof TickwheelException.Exists)) throw e;
      log.accept(what + " already running");
    }
  }

  /** java ... io.tickwheel.examples.Tour [host:port]  (token in $TICKWHEEL_TOKEN) */
  public static void main(String[] args) throws InterruptedException {
    String token = System.getenv().getOrDefault("TICKWHEEL_TOKEN", "");
    run(args.length > 0 ? args[0] : "127.0.0.1:7420", token, System.out::println);
  }
}
