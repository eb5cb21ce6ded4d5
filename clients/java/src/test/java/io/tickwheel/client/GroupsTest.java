package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Groups and bulk operations (docs/PROTOCOL.md "Bulk operations", "list_group") and the
 * request_id_reused error against the real server (frozen at tick 1000; each test uses its
 * own receivers and groups).
 */
class GroupsTest {
  static TestServer srv;

  @BeforeAll
  static void start() throws Exception {
    srv = TestServer.start("-max-request-ids", "100000"); // remembers request ids, as a cluster node does by default
  }

  @AfterAll
  static void stop() throws Exception {
    srv.close();
  }

  private static Throwable cause(CompletableFuture<?> f) {
    CompletionException e = assertThrows(CompletionException.class, f::join);
    return e.getCause();
  }

  private static List<String> keys(List<Timer> ts) {
    return ts.stream().map(t -> t.receiver() + "/" + t.tid()).toList();
  }

  @Test
  void addPutsTimersInAGroupThatListGroupPages() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      c.add(302, 1, 50, AddOptions.defaults().group(77)).join();
      c.add(301, 2, 50, AddOptions.defaults().group(77)).join();
      c.add(301, 1, 50, AddOptions.defaults().group(77)).join();
      c.add(301, 3, 50).join(); // no group
      c.add(303, 1, 50, AddOptions.defaults().group(78)).join();

      assertEquals(77, c.get(301, 1).join().group());
      assertEquals(0, c.get(301, 3).join().group());

      GroupPage p1 = c.listGroupPage(77, 0, 0, 2).join();
      assertEquals(List.of("301/1", "301/2"), keys(p1.timers()));
      assertTrue(p1.hasMore());
      assertEquals(302, p1.nextReceiver());
      assertEquals(1, p1.nextTid());
      GroupPage p2 = c.listGroupPage(77, p1.nextReceiver(), p1.nextTid(), 2).join();
      assertEquals(List.of("302/1"), keys(p2.timers()));
      assertFalse(p2.hasMore());

      assertEquals(List.of("301/1", "301/2", "302/1"), keys(c.listGroup(77).join()));
      assertEquals(List.of(), c.listGroup(79).join()); // an unknown group has no timers
      c.cancelAll(301).join();
      c.cancelAll(302).join();
      c.cancelAll(303).join();
    }
  }

  @Test
  void pauseAllAndResumeAllOfAReceiver() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      long now = c.ping().join();
      c.add(311, 1, 10).join();
      c.add(311, 2, 20).join();
      c.add(312, 1, 10).join(); // another receiver: untouched
      assertEquals(2, c.pauseAll(311).join());
      assertTrue(c.get(311, 1).join().paused());
      assertFalse(c.get(312, 1).join().paused());
      c.add(311, 3, 30).join(); // the receiver is marked paused: a new timer starts paused
      assertTrue(c.get(311, 3).join().paused());
      assertEquals(0, c.pauseAll(311).join()); // none left running

      assertEquals(3, c.resumeAll(311).join());
      Timer t = c.get(311, 2).join();
      assertFalse(t.paused());
      assertEquals(20, t.remaining()); // the ticks it had left (the server is frozen)
      assertEquals(now + 20, t.due());
      c.add(311, 4, 5).join(); // the mark is cleared
      assertFalse(c.get(311, 4).join().paused());
      c.cancelAll(311).join();
      c.cancelAll(312).join();
    }
  }

  @Test
  void pauseGroupResumeGroupAndCancelGroupActAcrossReceivers() {
    try (TickwheelClient c = TickwheelClient.connect(srv.admin())) {
      c.add(321, 1, 10, AddOptions.defaults().group(88)).join();
      c.add(322, 1, 10, AddOptions.defaults().group(88)).join();
      c.add(322, 2, 10).join(); // same receiver, no group
      assertEquals(2, c.pauseGroup(88).join());
      assertTrue(c.get(321, 1).join().paused());
      assertTrue(c.get(322, 1).join().paused());
      assertFalse(c.get(322, 2).join().paused());
      c.add(323, 1, 10, AddOptions.defaults().group(88)).join(); // added to a paused group
      assertTrue(c.get(323, 1).join().paused());
      assertEquals(3, c.resumeGroup(88).join());
      assertFalse(c.get(321, 1).join().paused());

      assertEquals(3, c.cancelGroup(88).join());
      assertInstanceOf(TickwheelException.NotFound.class, cause(c.get(321, 1)));
      assertInstanceOf(TickwheelException.NotFound.class, cause(c.get(323, 1)));
      assertEquals(10, c.get(322, 2).join().remaining()); // not in the group: still there
      assertEquals(0, c.cancelGroup(88).join());
      c.cancelAll(322).join();

      // Group 0 is no group: on the wire pause_all [0, 0] would pause receiver 0's timers.
      assertThrows(IllegalArgumentException.class, () -> c.pauseGroup(0));
      assertThrows(IllegalArgumentException.class, () -> c.resumeGroup(0));
      assertThrows(IllegalArgumentException.class, () -> c.cancelGroup(0));
    }
  }

  @Test
  void aReusedRequestIdIsATypedError() throws Exception {
    // Two different adds with the same (client, id), as a buggy client would send them:
    // the second is refused with request_id_reused, which reads as RequestIdReused.
    try (Socket s = new Socket("127.0.0.1", Integer.parseInt(srv.addr.substring(srv.addr.lastIndexOf(':') + 1)))) {
      s.setSoTimeout(10_000);
      OutputStream out = s.getOutputStream();
      DataInputStream in = new DataInputStream(s.getInputStream());
      out.write(Protocol.encode(Protocol.HELLO, 1, Map.of("version", 1L, "name", "java-test")));
      assertInstanceOf(Protocol.Ok.class, read(in));
      out.write(Protocol.encode(Protocol.ADD, 5, Map.of("receiver", 331L, "tid", 1L, "after", 10L, "repeat", 1L, "client", 7L)));
      assertInstanceOf(Protocol.Ok.class, read(in));
      out.write(Protocol.encode(Protocol.ADD, 5, Map.of("receiver", 331L, "tid", 2L, "after", 10L, "repeat", 1L, "client", 7L)));
      Protocol.Err e = assertInstanceOf(Protocol.Err.class, read(in));
      assertEquals(TickwheelException.REQUEST_ID_REUSED, e.code());
      TickwheelException x = TickwheelException.of("add", e.code(), e.message(), e.leader());
      assertInstanceOf(TickwheelException.RequestIdReused.class, x);
      assertEquals("request_id_reused", x.codeName());
    }
  }

  private static Protocol.Message read(DataInputStream in) throws Exception {
    byte[] b = new byte[in.readInt()];
    in.readFully(b);
    return Protocol.decode(b, 0, b.length);
  }
}
