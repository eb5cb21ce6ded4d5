package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.msgpack.value.ValueFactory;

/** Delivery's acknowledged-mode logic on its own: events pushed in, acks counted as sent. */
class DeliveryTest {
  /**
   * Auto acks are cumulative and batched: a burst of 2000 events handled by the listener gives
   * few acks, increasing, the last one covering everything. The client sends the acks due at
   * once every 256 events per receiver, else 5 ms after the first is due, so the bound counts
   * the timer's turns in the time the burst took. Before, the event thread flushed whenever
   * its queue was momentarily empty and every 64 events: about an ack per 64 events or more.
   * The timer thread's sends are slowed, as a preempted thread's would be: an ack it took
   * must still reach the wire before a higher one the event thread takes meanwhile.
   */
  @Test
  void autoAcksAreBatched() throws Exception {
    final int n = 2000;
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    try (ServerSocket peer = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Connection conn = Connection.open("127.0.0.1:" + peer.getLocalPort(), 5000, null, 0, m -> { }, e -> { });
      CountDownLatch handled = new CountDownLatch(n);
      ClientOptions o = new ClientOptions("127.0.0.1:1").listener(e -> handled.countDown());
      List<Long> acks = new CopyOnWriteArrayList<>();
      Thread timerThread = timer.submit(Thread::currentThread).get();
      Delivery d = new Delivery(o, timer, () -> conn, (c, r, seq, onOk) -> {
        if (Thread.currentThread() == timerThread) {
          try {
            Thread.sleep(5); // the timer thread preempted between taking an ack and sending it
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
        acks.add(seq);
        onOk.run();
      });
      Thread events = TickwheelClient.daemon(d::eventLoop, "events");
      events.start();
      long start = System.nanoTime();
      d.bindReplied(5, new Delivery.Bound(false, AckMode.AUTO),
          List.of(ValueFactory.newInteger(n), ValueFactory.newInteger(0), ValueFactory.newInteger(1)));
      for (long seq = 1; seq <= n; seq++) {
        d.onPush(new Protocol.Push(new Event.Fire(5, 1, seq, seq, 0, false, null, seq, 0)));
      }
      assertTrue(handled.await(10, TimeUnit.SECONDS), "the listener got every event");
      long end = System.nanoTime() + 10_000_000_000L;
      while (d.acked(5) != n && System.nanoTime() < end) Thread.sleep(1);
      assertEquals(n, d.acked(5), "the last ack covers every event");
      long tookMs = (System.nanoTime() - start) / 1_000_000;
      long timerTurns = tookMs / 5 + 1;
      assertTrue(acks.size() <= n / 256 + timerTurns + 1,
          acks.size() + " acks for " + n + " events in " + tookMs + " ms: " + acks);
      for (int i = 1; i < acks.size(); i++) assertTrue(acks.get(i) > acks.get(i - 1), "acks increase: " + acks);
      d.close();
      conn.close(new java.io.IOException("test over"));
      events.join(5000);
    } finally {
      timer.shutdownNow();
    }
  }
}
