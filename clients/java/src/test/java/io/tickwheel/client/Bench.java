package io.tickwheel.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Bench measures adds/s against a running server, as loadtest/cmd/gobench does for the Go
 * client: n one-shot adds (receivers spread over 1024, due far ahead) with {@code callers}
 * adds in flight at once (1: each add waits for its reply), then cancel_all. A first,
 * untimed pass of 100,000 pipelined adds lets the JIT compile the client's paths. Prints one
 * JSON line. Run by bench/run.sh: {@code Bench ADDR TOKEN N CALLERS}.
 */
public final class Bench {
  private Bench() {}

  /** adds adds n timers with callers in flight and returns the seconds it took. */
  private static double adds(TickwheelClient c, long base, int n, int callers) throws Exception {
    Semaphore window = new Semaphore(callers);
    AtomicReference<Throwable> failed = new AtomicReference<>();
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      window.acquire();
      CompletableFuture<Long> f = c.add(base + i % 1024, i + 1, 1_000_000);
      f.whenComplete((v, e) -> {
        if (e != null) failed.compareAndSet(null, e);
        window.release();
      });
    }
    window.acquire(callers);
    double s = (System.nanoTime() - t0) / 1e9;
    if (failed.get() != null) throw new RuntimeException(failed.get());
    for (long r = 0; r < 1024; r++) c.cancelAll(base + r).join();
    return s;
  }

  public static void main(String[] args) throws Exception {
    String addr = args[0];
    String token = args[1];
    int n = Integer.parseInt(args[2]);
    int callers = Integer.parseInt(args[3]);
    try (TickwheelClient c = TickwheelClient.connect(new ClientOptions(addr).token(token).name("bench-java"))) {
      long base = 3_000_000_000L + ProcessHandle.current().pid() * 10_000;
      adds(c, base, 100_000, 128); // warm-up, not timed
      double s = adds(c, base, n, callers);
      System.out.printf("{\"client\":\"java\",\"n\":%d,\"callers\":%d,\"adds_per_s\":%d}%n", n, callers, (long) (n / s));
    }
  }
}
