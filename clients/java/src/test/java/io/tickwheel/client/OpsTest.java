package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Every operation against the real server (frozen at tick 1000; each test uses its own receivers). */
class OpsTest {
  static TestServer srv;

  @BeforeAll
  static void start() throws Exception {
    srv = TestServer.start();
  }

  @AfterAll
  static void stop() throws Exception {
    srv.close();
  }

  private static Throwable cause(CompletableFuture<?> f) {
    CompletionException e = assertThrows(CompletionException.class, f::join);
    return e.getCause();
  }

  @Test
  void helloReportsTheServer() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      HelloInfo h = c.hello();
      assertTrue(h.session() > 0);
      assertTrue(h.tickNs() > 0);
      assertTrue(h.limits().get("max_frame") > 0);
      assertEquals(srv.addr, c.address());
    }
  }

  @Test
  void addFireGetListPauseResumeCancel() throws Exception {
    Events ev = new Events();
    try (TickwheelClient c = TickwheelClient.connect(srv.admin().listener(ev))) {
      long now = c.ping().join();
      BindResult b = c.bind(101).join();
      assertEquals(0, b.delivered());
      assertEquals(now + 3, c.add(101, 11, 3, AddOptions.repeat(4).data("poison")).join());
      assertEquals(now + 1, c.add(101, 12, 1, AddOptions.repeat(5)).join());
      Timer t = c.get(101, 11).join();
      assertEquals(now + 3, t.due());
      assertEquals(3, t.every());
      assertEquals(4, t.repeat());
      assertArrayEquals("poison".getBytes(StandardCharsets.UTF_8), t.data());
      assertFalse(t.paused());

      c.pause(101, 12).join();
      assertTrue(c.get(101, 12).join().paused());
      assertInstanceOf(TickwheelException.BadState.class, cause(c.pause(101, 12)));
      c.resume(101, 12).join();
      assertInstanceOf(TickwheelException.BadState.class, cause(c.resume(101, 12)));

      FastForwardResult ff = c.fastForward(3).join();
      assertEquals(now + 3, ff.now());
      assertEquals(4, ff.fired()); // tid 12 at +1, +2, +3 and tid 11 at +3
      List<Event.Fire> fs = ev.fires(4);
      // Same tick: tid 11 was added first (pause and resume keep 12's place after it).
      assertEquals(List.of(12L, 12L, 11L, 12L), fs.stream().map(Event.Fire::tid).toList());
      assertEquals(List.of(1L, 2L, 3L, 4L), fs.stream().map(Event.Fire::seq).toList());
      assertArrayEquals("poison".getBytes(StandardCharsets.UTF_8), fs.get(2).data());
      assertEquals(now + 3, fs.get(2).tick());
      assertEquals(1, fs.get(2).fired());

      c.cancel(101, 11).join();
      assertInstanceOf(TickwheelException.NotFound.class, cause(c.get(101, 11)));
      assertInstanceOf(TickwheelException.NotFound.class, cause(c.cancel(101, 11)));
      assertEquals(1, c.cancelAll(101).join());
      assertEquals(0, c.listAll(101).join().size());
    }
  }

  @Test
  void listPagesThroughEveryTimer() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      List<CompletableFuture<Long>> adds = new ArrayList<>();
      for (long tid = 1; tid <= 25; tid++) adds.add(c.add(102, tid, 1000 + tid));
      adds.forEach(CompletableFuture::join);
      ListPage p = c.list(102, 0, 10).join();
      assertEquals(10, p.timers().size());
      assertEquals(11, p.next());
      ListPage last = c.list(102, 21, 10).join();
      assertEquals(5, last.timers().size());
      assertEquals(0, last.next());
      List<Timer> all = c.listAll(102).join();
      assertEquals(25, all.size());
      for (int i = 0; i < 25; i++) assertEquals(i + 1, all.get(i).tid());
      assertEquals(25, c.cancelAll(102).join());
    }
  }

  @Test
  void addVariantsAndErrors() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      long now = c.ping().join();
      long tickNs = c.hello().tickNs();
      assertEquals(now + 5, c.addAt(103, 1, now + 5, AddOptions.defaults()).join());
      assertEquals(now + 1, c.add(103, 2, 0).join()); // a zero delay fires at the next tick
      long due = c.addAfter(103, 3, Duration.ofNanos(tickNs * 3 + 1)).join();
      assertTrue(due == now + 4 || due == now + 3, "addAfter due " + due + " now " + now);
      assertInstanceOf(TickwheelException.Exists.class, cause(c.add(103, 1, 5)));
      assertEquals(now + 7, c.add(103, 1, 7, AddOptions.defaults().replace()).join());
      long cron = c.addSchedule(103, 4, "0 4 * * *", "Europe/Paris", AddOptions.forever().missed(Missed.SKIP)).join();
      Timer t = c.get(103, 4).join();
      assertEquals(cron, t.due());
      assertEquals("0 4 * * *", t.schedule());
      assertEquals("Europe/Paris", t.zone());
      assertEquals(Missed.SKIP, t.missed());
      assertEquals(TickwheelClient.FOREVER, t.repeat());
      Throwable bad = cause(c.addSchedule(103, 5, "0 25 * * *", "", AddOptions.defaults()));
      assertInstanceOf(TickwheelException.InvalidArgument.class, bad);
      assertTrue(bad.getMessage().contains("hour"), bad.getMessage());
      assertEquals(7, ((TickwheelException) bad).code());
      assertEquals("invalid_argument", ((TickwheelException) bad).codeName());
      c.cancelAll(103).join();
    }
  }

  @Test
  void adminOps() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      long now = c.freeze().join();
      assertEquals(now, c.setSpeed(2.5).join());
      Map<String, Object> s = c.stats().join();
      assertEquals(Boolean.TRUE, s.get("frozen"));
      assertEquals(2.5, (Double) s.get("speed"));
      assertTrue((Long) s.get("sessions") >= 1);
      assertEquals(now, c.setSpeed(1).join());
      assertInstanceOf(TickwheelException.InvalidArgument.class, cause(c.setSpeed(0)));
      assertInstanceOf(TickwheelException.BadState.class, cause(c.clusterStatus())); // a single server
      assertInstanceOf(TickwheelException.BadState.class, cause(c.clusterCheck()));
      assertEquals(now, c.freeze().join());
    }
  }

  @Test
  void adminOpsNeedTheAdminToken() {
    try (TickwheelClient c = TickwheelClient.connect(srv.plain())) {
      assertInstanceOf(TickwheelException.Unauthorized.class, cause(c.stats()));
      assertInstanceOf(TickwheelException.Unauthorized.class, cause(c.fastForward(1)));
      c.ping().join(); // the session goes on
    }
    TickwheelException e = assertThrows(TickwheelException.class,
        () -> TickwheelClient.connect(srv.plain().token("not-the-token-at-all")));
    assertInstanceOf(TickwheelException.Unauthorized.class, e);
  }

  @Test
  void bindUnbindTakeoverAndManualAck() throws Exception {
    Events e1 = new Events();
    Events e2 = new Events();
    try (TickwheelClient a = TickwheelClient.connect(srv.admin().listener(e1));
        TickwheelClient b = TickwheelClient.connect(srv.admin().listener(e2))) {
      a.bind(104, AckMode.MANUAL, false).join();
      a.add(104, 1, 1, AddOptions.repeat(3)).join();
      a.fastForward(3).join();
      List<Event.Fire> fs = e1.fires(3);
      long first = fs.get(0).seq();
      a.ack(104, fs.get(1).seq());
      assertThrows(IllegalStateException.class, () -> a.ack(999, 1));
      long end = System.nanoTime() + 10_000_000_000L; // the ack is batched for a few ms
      while (a.acked(104) < fs.get(1).seq() && System.nanoTime() < end) Thread.sleep(5);
      assertEquals(fs.get(1).seq(), a.acked(104));
      // b takes 104 over: a gets a takeover notice; the one event not acked comes again to b.
      BindResult r = b.bind(104, AckMode.MANUAL, false).join();
      assertEquals(1, r.delivered());
      assertEquals(first + 2, r.firstSeq());
      Event t = e1.take(1).get(0);
      assertEquals(new Event.Takeover(104, b.hello().session()), t);
      assertEquals(first + 2, e2.fires(1).get(0).seq());
      assertInstanceOf(TickwheelException.NotFound.class, cause(a.unbind(104)));
      b.unbind(104).join();
      assertNull(e2.poll(100));
    }
  }

  @Test
  void pipelinesManyRequests() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      List<CompletableFuture<Long>> fs = new ArrayList<>();
      byte[] data = new byte[200];
      for (long tid = 1; tid <= 2000; tid++) fs.add(c.add(105, tid, 100_000, AddOptions.defaults().data(data)));
      for (CompletableFuture<Long> f : fs) f.join();
      // A page of 1000 timers with data is a reply frame of over 200 KiB: more than the
      // client's first read buffer.
      ListPage p = c.list(105, 0, 0).join();
      assertEquals(1000, p.timers().size());
      assertEquals(1001, p.next());
      assertEquals(2000, c.listAll(105).join().size());
      assertEquals(2000, c.cancelAll(105).join());
    }
  }

  @Test
  void callsFromManyThreadsAtOnce() throws Exception {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      List<Thread> ts = new ArrayList<>();
      java.util.concurrent.ConcurrentLinkedQueue<Throwable> errs = new java.util.concurrent.ConcurrentLinkedQueue<>();
      for (int k = 0; k < 8; k++) {
        long from = k * 500L + 1;
        Thread t = new Thread(() -> {
          try {
            List<CompletableFuture<Long>> fs = new ArrayList<>();
            for (long tid = from; tid < from + 500; tid++) fs.add(c.add(106, tid, 50_000 + tid));
            for (int i = 0; i < fs.size(); i++) {
              if (fs.get(i).join() != c.get(106, from + i).join().due()) throw new AssertionError("due of " + (from + i));
            }
          } catch (Throwable e) {
            errs.add(e);
          }
        });
        ts.add(t);
        t.start();
      }
      for (Thread t : ts) t.join();
      assertTrue(errs.isEmpty(), "errors: " + errs);
      List<Timer> all = c.listAll(106).join();
      assertEquals(4000, all.size());
      for (int i = 0; i < all.size(); i++) assertEquals(i + 1, all.get(i).tid());
      assertEquals(4000, c.cancelAll(106).join());
    }
  }

  @Test
  void closedClientFailsCalls() {
    TickwheelClient c = TickwheelClient.connect(srv.admin());
    c.close();
    assertInstanceOf(TickwheelException.Closed.class, cause(c.ping()));
    c.close(); // idempotent
  }

  @Test
  void connectFailsWithNoServer() {
    TickwheelException e = assertThrows(TickwheelException.class,
        () -> TickwheelClient.connect(new ClientOptions("127.0.0.1:1").connectTimeout(Duration.ofSeconds(1))));
    assertInstanceOf(TickwheelException.ConnectFailed.class, e);
  }
}
