package io.tickwheel.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Bench measures a client's throughput against a running server, as loadtest/cmd/gobench
 * does for the Go client. Run by bench/run.sh; prints one JSON line.
 *
 * <ul>
 *   <li>{@code Bench ADDR TOKEN N CALLERS}: adds/s, n one-shot adds (receivers spread over
 *       1024, due far ahead) with {@code callers} adds in flight at once (1: each add waits
 *       for its reply), then cancel_all. A first, untimed pass of 100,000 pipelined adds lets
 *       the JIT compile the client's paths.
 *   <li>{@code Bench ADDR TOKEN N CALLERS fires none|auto}: fires/s, gobench's measureFires:
 *       64 receivers bound here (plain, or acknowledged with automatic acks), n one-shot
 *       timers over them all due on the next tick (added with callers in flight, not timed),
 *       one fast_forward over that tick, timed until the listener has received every fire
 *       event. An untimed pass of 100,000 first, for the JIT.
 * </ul>
 */
public final class Bench {
  private static final int FIRE_RECEIVERS = 64;

  private Bench() {}

  /** addMany adds n timers (receiver base + i % spread, tid i + 1, due after ticks) with callers in flight. */
  private static void addMany(TickwheelClient c, long base, int spread, int n, int callers, long after) throws Exception {
    Semaphore window = new Semaphore(callers);
    AtomicReference<Throwable> failed = new AtomicReference<>();
    for (int i = 0; i < n; i++) {
      window.acquire();
      CompletableFuture<Long> f = c.add(base + i % spread, i + 1, after);
      f.whenComplete((v, e) -> {
        if (e != null) failed.compareAndSet(null, e);
        window.release();
      });
    }
    window.acquire(callers);
    if (failed.get() != null) throw new RuntimeException(failed.get());
  }

  /** cpuNanos: the CPU time this process has used (every thread), or -1 where the JVM does not say. */
  private static long cpuNanos() {
    java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
    return os instanceof com.sun.management.OperatingSystemMXBean s ? s.getProcessCpuTime() : -1;
  }

  /** The CPU time of the last timed pass, in ns (the process's, so the server's is not in it). */
  private static long lastCpu;

  /** adds adds n timers with callers in flight and returns the seconds it took. */
  private static double adds(TickwheelClient c, long base, int n, int callers) throws Exception {
    long t0 = System.nanoTime();
    long c0 = cpuNanos();
    addMany(c, base, 1024, n, callers, 1_000_000);
    lastCpu = cpuNanos() - c0;
    double s = (System.nanoTime() - t0) / 1e9;
    for (long r = 0; r < 1024; r++) c.cancelAll(base + r).join();
    return s;
  }

  /** fires runs one fires pass of n events (the listener counts down latch) and returns its seconds. */
  private static double fires(TickwheelClient c, long base, int n, int callers, AckMode mode,
      AtomicReference<CountDownLatch> latch) throws Exception {
    for (long r = 0; r < FIRE_RECEIVERS; r++) c.bind(base + r, mode, false).join();
    addMany(c, base, FIRE_RECEIVERS, n, callers, 1);
    CountDownLatch done = new CountDownLatch(n);
    latch.set(done);
    long t0 = System.nanoTime();
    long c0 = cpuNanos();
    CompletableFuture<FastForwardResult> ff = c.fastForward(1); // its reply follows the events
    if (!done.await(60, TimeUnit.SECONDS)) {
      throw new IllegalStateException("events stopped after " + (n - done.getCount()) + " of " + n);
    }
    lastCpu = cpuNanos() - c0;
    double s = (System.nanoTime() - t0) / 1e9;
    ff.join();
    for (long r = 0; r < FIRE_RECEIVERS; r++) c.unbind(base + r).join();
    return s;
  }

  public static void main(String[] args) throws Exception {
    String addr = args[0];
    String token = args[1];
    int n = Integer.parseInt(args[2]);
    int callers = Integer.parseInt(args[3]);
    boolean fires = args.length > 4 && args[4].equals("fires");
    AckMode mode = args.length > 5 && args[5].equals("auto") ? AckMode.AUTO : AckMode.NONE;
    AtomicReference<CountDownLatch> latch = new AtomicReference<>(new CountDownLatch(0));
    ClientOptions o = new ClientOptions(addr).token(token).name("bench-java").eventBuffer(1 << 16)
        .listener(e -> {
          if (e instanceof Event.Fire) latch.get().countDown();
        });
    try (TickwheelClient c = TickwheelClient.connect(o)) {
      long base = 3_000_000_000L + ProcessHandle.current().pid() * 10_000;
      if (fires) {
        fires(c, base + 5000, 100_000, callers, mode, latch); // warm-up, not timed
        double s = fires(c, base + 5000, n, callers, mode, latch);
        System.out.printf("{\"client\":\"java\",\"n\":%d,\"callers\":%d,\"ack\":\"%s\",\"fires_per_s\":%d,"
            + "\"cpu_ns_per_fire\":%d}%n", n, callers, mode == AckMode.AUTO ? "auto" : "none", (long) (n / s), lastCpu / n);
      } else {
        adds(c, base, 100_000, 128); // warm-up, not timed
        double s = adds(c, base, n, callers);
        System.out.printf("{\"client\":\"java\",\"n\":%d,\"callers\":%d,\"adds_per_s\":%d,\"cpu_ns_per_add\":%d}%n",
            n, callers, (long) (n / s), lastCpu / n);
      }
    }
  }
}
