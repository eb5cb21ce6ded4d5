package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

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
    try (TestServer srv = TestServer.start("-max-request-ids", "100000"); Relay relay = new Relay(srv.addr);
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

      // The bulk ops: applied, reply lost; the retry gets the first count, not 0.
      admin.add(402, 1, 50, new AddOptions().group(42)).join();
      admin.add(402, 2, 50, new AddOptions().group(42)).join();
      assertEquals(2L, lostBulk(relay, () -> c.pauseAll(402), () -> admin.get(402, 2).join().paused()));
      assertEquals(2L, lostBulk(relay, () -> c.resumeGroup(42), () -> !admin.get(402, 2).join().paused()));
      assertEquals(2L, lostBulk(relay, () -> c.cancelGroup(42), () -> !exists(admin, 402, 2)));
    }
  }

  /** lostBulk makes the bulk call, waits until it was applied, cuts its reply and returns its result. */
  private static long lostBulk(Relay relay, java.util.function.Supplier<CompletableFuture<Long>> bulk,
      BooleanSupplier applied) throws InterruptedException {
    relay.holdReplies = true;
    CompletableFuture<Long> call = bulk.get();
    waitFor("the bulk op applied", applied);
    relay.cut();
    relay.holdReplies = false;
    return call.join();
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

  private static byte[] readFrame(DataInputStream in) throws IOException {
    byte[] b = new byte[in.readInt()];
    in.readFully(b);
    return b;
  }

  private static void writeFrame(OutputStream out, MessageBufferPacker p) throws IOException {
    byte[] body = p.toByteArray();
    out.write(new byte[] {(byte) (body.length >>> 24), (byte) (body.length >>> 16), (byte) (body.length >>> 8), (byte) body.length});
    out.write(body);
    out.flush();
  }

  @Test
  void aChangeAnsweredNotLeaderIsSentToTheLeaderWithTheSameRequestId() throws Exception {
    // A node that says hello as a server with request ids, then steps down: it answers the
    // add not_leader, naming the real server. The client sends the add there, byte for byte.
    try (TestServer srv = TestServer.start("-max-request-ids", "100000"); // the leader remembers ids, as a cluster node does by default
        ServerSocket follower = new ServerSocket(0, 5, InetAddress.getLoopbackAddress())) {
      AtomicReference<byte[]> seen = new AtomicReference<>();
      Thread t = new Thread(() -> {
        try (Socket s = follower.accept()) {
          DataInputStream in = new DataInputStream(s.getInputStream());
          OutputStream out = s.getOutputStream();
          readFrame(in); // hello
          MessageBufferPacker p = MessagePack.newDefaultBufferPacker();
          p.packArrayHeader(3).packInt(0).packInt(1).packArrayHeader(5).packInt(9).packInt(1000).packInt(10_000_000)
              .packString("fake").packMapHeader(1).packString("request_id_ticks").packInt(30_000);
          writeFrame(out, p);
          byte[] add = readFrame(in);
          seen.set(add);
          long id;
          try (org.msgpack.core.MessageUnpacker u = MessagePack.newDefaultUnpacker(add)) {
            u.unpackArrayHeader();
            u.unpackLong(); // op
            id = u.unpackLong();
          }
          p = MessagePack.newDefaultBufferPacker();
          p.packArrayHeader(5).packInt(1).packLong(id).packInt(14).packString("stepped down").packString(srv.addr);
          writeFrame(out, p);
        } catch (IOException e) {
          // the test fails on its own
        }
      });
      t.setDaemon(true);
      t.start();
      try (TickwheelClient c = TickwheelClient.connect(new ClientOptions("127.0.0.1:" + follower.getLocalPort())
          .reconnectBackoff(Duration.ofMillis(20), Duration.ofMillis(200)))) {
        long due = c.add(411, 1, 10).join();
        assertEquals(srv.addr, c.address());
        assertEquals(due, c.get(411, 1).join().due());
      }
      byte[] add = seen.get();
      // The same bytes (client id and request id) sent to the leader again: the server
      // remembers them and answers with the first reply, changing nothing.
      try (Socket s = new Socket("127.0.0.1", Integer.parseInt(srv.addr.substring(srv.addr.lastIndexOf(':') + 1)));
          TickwheelClient admin = TickwheelClient.connect(srv.admin())) {
        s.setSoTimeout(10_000);
        DataInputStream in = new DataInputStream(s.getInputStream());
        OutputStream out = s.getOutputStream();
        out.write(Protocol.encode(Protocol.HELLO, 1, java.util.Map.of("version", 1L, "name", "java-test")));
        readFrame(in);
        byte[] frame = new byte[4 + add.length];
        frame[0] = (byte) (add.length >>> 24);
        frame[1] = (byte) (add.length >>> 16);
        frame[2] = (byte) (add.length >>> 8);
        frame[3] = (byte) add.length;
        System.arraycopy(add, 0, frame, 4, add.length);
        out.write(frame);
        byte[] r = readFrame(in);
        Protocol.Message m = Protocol.decode(r, 0, r.length);
        assertInstanceOf(Protocol.Ok.class, m, "a retry of the remembered add: " + HexFormat.of().formatHex(r));
        assertEquals(1, admin.listAll(411).join().size());
      }
    }
  }
}
