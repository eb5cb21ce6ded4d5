package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** Events is a listener that queues every event, for tests to take with a deadline. */
final class Events implements EventListener {
  final LinkedBlockingQueue<Event> q = new LinkedBlockingQueue<>();
  volatile long delayMs;

  @Override
  public void onEvent(Event e) {
    if (delayMs > 0) {
      try {
        Thread.sleep(delayMs);
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
      }
    }
    q.add(e);
  }

  /** take returns the next n events, failing after 10 s without one. */
  List<Event> take(int n) throws InterruptedException {
    List<Event> out = new ArrayList<>();
    while (out.size() < n) {
      Event e = q.poll(10, TimeUnit.SECONDS);
      assertNotNull(e, "event " + (out.size() + 1) + " of " + n + " did not come; got " + out);
      out.add(e);
    }
    return out;
  }

  /** fires returns the next n events, which must all be fire events. */
  List<Event.Fire> fires(int n) throws InterruptedException {
    List<Event.Fire> out = new ArrayList<>();
    for (Event e : take(n)) {
      if (!(e instanceof Event.Fire f)) throw new AssertionError("want a fire event, got " + e);
      out.add(f);
    }
    return out;
  }

  /** none checks that no event comes within ms. */
  Event poll(long ms) throws InterruptedException {
    return q.poll(ms, TimeUnit.MILLISECONDS);
  }
}
