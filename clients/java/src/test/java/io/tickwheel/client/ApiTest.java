package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** Timeouts, the Flow.Publisher of events, and calls made while the client reconnects. */
class ApiTest {
  @Test
  void aCallWithoutAReplyTimesOut() throws Exception {
    try (TestServer srv = TestServer.start(); Relay relay = new Relay(srv.addr);
        TickwheelClient c = TickwheelClient.connect(new ClientOptions(relay.addr).requestTimeout(Duration.ofMillis(200)))) {
      c.ping().join();
      relay.held = true;
      CompletionException e = assertThrows(CompletionException.class, () -> c.ping().join());
      assertInstanceOf(TimeoutException.class, e.getCause());
      relay.held = false;
      assertTrue(c.ping().join() >= 1000); // the connection goes on
    }
  }

  @Test
  void anIdleClientPingsAndKeepsItsSession() throws Exception {
    java.nio.file.Path cfg = java.nio.file.Files.createTempFile("tw-java", ".yaml");
    java.nio.file.Files.writeString(cfg, "timeouts:\n  idle: 300ms\n");
    try (TestServer srv = TestServer.start("-config", cfg.toString());
        TickwheelClient c = TickwheelClient.connect(srv.plain())) {
      assertEquals(300L, c.hello().limits().get("idle_timeout_ms"));
      long session = c.hello().session();
      Thread.sleep(1200); // four idle timeouts with nothing sent by the caller
      assertTrue(c.ping().join() >= 1000);
      assertEquals(session, c.hello().session(), "the client reconnected: its idle pings did not keep the session");
    } finally {
      java.nio.file.Files.deleteIfExists(cfg);
    }
  }

  @Test
  void resumeSyncLetsTwTimeFollowTheClockAndFreezeStopsIt() throws Exception {
    try (TestServer srv = TestServer.start(); TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      long start = c.resumeSync().join();
      assertEquals(1000, start);
      long end = System.nanoTime() + 10_000_000_000L;
      while (c.ping().join() < start + 5 && System.nanoTime() < end) Thread.sleep(10);
      long frozen = c.freeze().join();
      assertTrue(frozen >= start + 5, "tw-time did not follow the clock: " + frozen);
      Thread.sleep(50);
      assertEquals(frozen, c.ping().join());
      assertEquals(Boolean.TRUE, c.stats().join().get("frozen"));
    }
  }

  @Test
  void eventsThroughAFlowPublisher() throws Exception {
    try (TestServer srv = TestServer.start(); TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      List<Event> got = new CopyOnWriteArrayList<>();
      CountDownLatch three = new CountDownLatch(3);
      c.events().subscribe(new Flow.Subscriber<Event>() {
        private Flow.Subscription s;

        @Override
        public void onSubscribe(Flow.Subscription s) {
          this.s = s;
          s.request(1);
        }

        @Override
        public void onNext(Event e) {
          got.add(e);
          three.countDown();
          s.request(1);
        }

        @Override
        public void onError(Throwable t) {}

        @Override
        public void onComplete() {}
      });
      c.bind(301).join();
      c.add(301, 1, 1, AddOptions.repeat(3)).join();
      c.fastForward(3).join();
      assertTrue(three.await(10, TimeUnit.SECONDS));
      assertEquals(List.of(1L, 2L, 3L), got.stream().map(e -> ((Event.Fire) e).fired()).toList());
    }
  }

  @Test
  void callsMadeWhileDisconnectedGoOutOnTheNextConnection() throws Exception {
    try (TestServer srv = TestServer.start(); Relay relay = new Relay(srv.addr);
        TickwheelClient c = TickwheelClient.connect(new ClientOptions(relay.addr)
            .reconnectBackoff(Duration.ofMillis(50), Duration.ofMillis(100)))) {
      c.ping().join();
      relay.refusing = true;
      relay.cut();
      long end = System.nanoTime() + 10_000_000_000L;
      while (c.address() != null && System.nanoTime() < end) Thread.sleep(5);
      assertEquals(null, c.address());
      var add = c.add(302, 1, 10); // waits for a connection
      Thread.sleep(200);
      assertTrue(!add.isDone());
      relay.refusing = false;
      long due = add.join();
      assertEquals(due, c.get(302, 1).join().due());
    }
  }
}
