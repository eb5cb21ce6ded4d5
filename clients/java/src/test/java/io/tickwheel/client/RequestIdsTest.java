package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * Request ids (docs/PROTOCOL.md "Retrying changes"): a change whose reply was lost with the
 * connection is sent again with the same client id and request id, and the server answers
 * the retry with the first reply instead of applying the change twice.
 */
class RequestIdsTest {
  private static void waitFor(String what, BooleanSupplier ok) throws InterruptedException {
    long end = System.nanoTime() + 10_000_000_000L;
    while (!ok.getAsBoolean()) {
      if (System.nanoTime() > end) throw new AssertionError("timed out waiting for " + what);
      Thread.sleep(10);
    }
  }

  private static boolean exists(TickwheelClient c, long receiver, long tid) {
    try {
      c.get(receiver, tid).join();
      return true;
    } catch (CompletionException e) {
      assertInstanceOf(TickwheelException.NotFound.class, e.getCause());
      return false;
    }
  }

  @Test
  void aChangeWhoseReplyWasLostIsRetriedOnceAndAnsweredWithTheFirstReply() throws Exception {
    try (TestServer srv = TestServer.start(); Relay relay = new Relay(srv.addr);
        TickwheelClient admin = TickwheelClient.connect(srv.admin());
        TickwheelClient c = TickwheelClient.connect(new ClientOptions(relay.addr)
            .reconnectBackoff(Duration.ofMillis(20), Duration.ofMillis(200)))) {
      assertTrue(c.hello().limits().getOrDefault("request_id_ticks", 0L) > 0, "the server remembers request ids");
      long now = c.ping().join();

      // add: applied, its reply lost in a cut; the retry must not meet exists.
      relay.holdReplies = true;
      CompletableFuture<Long> add = c.add(401, 1, 10);
      waitFor("the add applied", () -> exists(admin, 401, 1));
      admin.fastForward(5).join(); // a second application would get a later due (or exists)
      relay.cut();
      relay.holdReplies = false;
      assertEquals(now + 10, add.join()); // the first reply: the due tick of then
      assertEquals(now + 10, admin.get(401, 1).join().due());

      // cancel: applied, reply lost; the retry must not meet not_found.
      relay.holdReplies = true;
      CompletableFuture<Void> cancel = c.cancel(401, 1);
      waitFor("the cancel applied", () -> !exists(admin, 401, 1));
      relay.cut();
      relay.holdReplies = false;
      cancel.join();
      assertFalse(exists(admin, 401, 1));

      // Changes after the reconnection carry new ids: a new add of the same tid is applied.
      assertEquals(now + 5 + 3, c.add(401, 1, 3).join());
    }
  }

  @Test
  void withoutReconnectALostReplyIsDisconnected() throws Exception {
    // Nothing to retry on: the caller learns the change may have been applied.
    try (TestServer srv = TestServer.start(); Relay relay = new Relay(srv.addr);
        TickwheelClient admin = TickwheelClient.connect(srv.admin());
        TickwheelClient c = TickwheelClient.connect(new ClientOptions(relay.addr).reconnect(false))) {
      relay.holdReplies = true;
      CompletableFuture<Long> add = c.add(402, 1, 10);
      waitFor("the add applied", () -> exists(admin, 402, 1));
      relay.cut();
      CompletionException e = assertThrows(CompletionException.class, add::join);
      assertInstanceOf(TickwheelException.Disconnected.class, e.getCause());
    }
  }
}
