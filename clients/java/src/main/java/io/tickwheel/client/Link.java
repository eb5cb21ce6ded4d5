package io.tickwheel.client;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.msgpack.value.Value;

/**
 * Link is a client's way to a server: it connects to the addresses of the options (following
 * not_leader to a cluster's leader), says hello, binds the receivers of its {@link Delivery}
 * again, keeps an idle connection alive with pings, reconnects with backoff when the
 * connection drops, hands the ready connection to callers ({@link #waitConn}) and numbers
 * the requests sent on it ({@link #sendOn}). Its state (the ready connection, the callers
 * waiting for one, the leader hint) is guarded by its lock; {@link #open} runs on the
 * caller of connect and then on the client's timer thread. Owned by its
 * {@link TickwheelClient}.
 */
final class Link {
  private static final System.Logger LOG = System.getLogger("io.tickwheel.client");

  private final ClientOptions o;
  private final ScheduledExecutorService timer;
  private final Delivery delivery;
  private final Object lock = new Object();
  private final List<CompletableFuture<Connection>> waiters = new ArrayList<>(); // guarded by lock
  private final AtomicLong ids = new AtomicLong(); // request ids: never reused in the client's life
  private Connection conn; // the ready connection; guarded by lock
  private boolean reconnecting; // guarded by lock
  private String hint = ""; // a leader named by not_leader; guarded by lock
  private ScheduledFuture<?> idlePing; // guarded by lock
  private volatile boolean closing;
  private volatile HelloInfo hello;

  Link(ClientOptions o, ScheduledExecutorService timer, Delivery delivery) {
    this.o = o;
    this.timer = timer;
    this.delivery = delivery;
  }

  /** current: the ready connection, or null while disconnected. */
  Connection current() {
    synchronized (lock) {
      return conn;
    }
  }

  /** hello: the server's reply to the latest hello (of the current connection once it is ready). */
  HelloInfo hello() {
    return hello;
  }

  /** closing: {@link #shutdown} has begun; nothing connects again. */
  boolean closing() {
    return closing;
  }

  /** nextId returns a request id not used before in the client's life. */
  long nextId() {
    return ids.incrementAndGet();
  }

  /**
   * open connects, says hello and binds the receivers again; the connection is then ready.
   * A leader hint from not_leader is tried first, then each address in turn, each following
   * up to 3 redirects.
   *
   * @throws TickwheelException ConnectFailed when no address could be connected (the last
   *     error as cause); Unauthorized or UnsupportedVersion at once (every node would say so)
   */
  void open() {
    List<String> order = new ArrayList<>();
    synchronized (lock) {
      if (!hint.isEmpty()) order.add(hint);
      hint = "";
    }
    order.addAll(o.addresses);
    TickwheelException last = null;
    for (String start : order) {
      String addr = start;
      for (int redirect = 0; redirect <= 3 && addr != null; redirect++) {
        try {
          Connection c = hello(addr);
          ready(c);
          return;
        } catch (TickwheelException.NotLeader e) {
          last = e;
          addr = e.leader().isEmpty() ? null : e.leader();
        } catch (TickwheelException.Unauthorized | TickwheelException.UnsupportedVersion e) {
          throw e; // every node would say the same
        } catch (TickwheelException e) {
          last = e;
          addr = null;
        }
      }
    }
    throw new TickwheelException.ConnectFailed("no server at " + String.join(",", o.addresses)
        + (last == null ? "" : ": " + last.getMessage()), last);
  }

  /** hello connects to addr, says hello (waiting for the reply) and sends the binds again. */
  private Connection hello(String addr) {
    Connection[] holder = new Connection[1];
    Connection c;
    int timeoutMs = (int) Math.max(1, o.connectTimeout.toMillis());
    try {
      c = Connection.open(addr, timeoutMs, o.tls, o.maxFrame, delivery::onPush, e -> onClose(holder[0], e));
    } catch (Exception e) {
      throw new TickwheelException.ConnectFailed("connect " + addr + ": " + e, e);
    }
    holder[0] = c;
    Map<String, Object> a = new HashMap<>();
    a.put("version", (long) Protocol.VERSION);
    a.put("name", o.name);
    a.put("token", o.token);
    CompletableFuture<List<Value>> f = sendOn(c, Protocol.HELLO, a, null);
    try {
      hello = Protocol.hello(f.get(timeoutMs, TimeUnit.MILLISECONDS));
    } catch (Exception e) {
      c.close(e);
      Throwable cause = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
      if (cause instanceof TickwheelException te && te.code() != 0) throw te;
      throw new TickwheelException.ConnectFailed("hello " + addr + ": " + cause, cause);
    }
    for (Map.Entry<Long, Delivery.Bound> b : delivery.bound.entrySet()) {
      long r = b.getKey();
      Delivery.Bound bd = b.getValue();
      sendOn(c, Protocol.BIND, bindArgs(r, bd), res -> delivery.bindReplied(r, bd, res))
          .exceptionally(e -> Calls.warn("bind again", e));
    }
    return c;
  }

  /** bindArgs: the arguments of a bind of receiver as b says. */
  static Map<String, Object> bindArgs(long receiver, Delivery.Bound b) {
    Map<String, Object> a = new HashMap<>();
    a.put("receiver", receiver);
    a.put("ephemeral", b.ephemeral());
    a.put("ack", b.mode() != AckMode.NONE);
    return a;
  }

  /** ready makes c the current connection and hands it to the callers waiting for one. */
  private void ready(Connection c) {
    List<CompletableFuture<Connection>> ws;
    synchronized (lock) {
      if (closing) {
        c.close(new TickwheelException.Closed("connect"));
        return;
      }
      if (c.isClosed()) { // it closed before it got ready: onClose ignored it, so open() goes on
        throw new TickwheelException.Disconnected("connect", null);
      }
      conn = c;
      ws = new ArrayList<>(waiters);
      waiters.clear();
      if (delivery.readPaused()) c.pauseReading();
      long idle = hello.limits().getOrDefault("idle_timeout_ms", 0L);
      if (idlePing != null) idlePing.cancel(false);
      if (idle > 0) {
        long every = Math.max(10, idle / 6);
        idlePing = timer.scheduleAtFixedRate(() -> pingIfIdle(c, idle), every, every, TimeUnit.MILLISECONDS);
      }
    }
    for (CompletableFuture<Connection> w : ws) w.complete(c);
    delivery.flushAcks(); // acks wanted while disconnected
  }

  private void pingIfIdle(Connection c, long idleMs) {
    if (c.isClosed() || System.nanoTime() - c.lastWriteNanos() < idleMs * 1_000_000L / 3) return;
    sendOn(c, Protocol.PING, Map.of(), null).exceptionally(e -> null);
  }

  private void onClose(Connection c, Throwable cause) {
    List<CompletableFuture<Connection>> fail = List.of();
    synchronized (lock) {
      if (c == null || conn != c) return; // a connection that never got ready: open() reports it
      conn = null;
      if (cause instanceof TickwheelException.NotLeader nl) hint = nl.leader();
      if (closing) return;
      if (!o.reconnect) {
        fail = new ArrayList<>(waiters);
        waiters.clear();
      } else if (!reconnecting) {
        reconnecting = true;
        timer.execute(() -> reconnect(o.reconnectMin.toMillis()));
      }
    }
    LOG.log(System.Logger.Level.DEBUG, "tickwheel: disconnected from {0}: {1}", c.address(), cause);
    for (CompletableFuture<Connection> w : fail) w.completeExceptionally(new TickwheelException.Disconnected("connect", cause));
  }

  private void reconnect(long delayMs) {
    if (closing) return;
    try {
      open();
      synchronized (lock) {
        reconnecting = false;
      }
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.DEBUG, "tickwheel: reconnect failed: {0}", e.getMessage());
      if (closing) return;
      long next = Math.min(delayMs * 2, o.reconnectMax.toMillis());
      long jittered = delayMs / 2 + (long) (Math.random() * delayMs / 2);
      try {
        timer.schedule(() -> reconnect(next), jittered, TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.RejectedExecutionException ignored) {
        // closed meanwhile
      }
    }
  }

  /** readyConn returns the ready connection if it is not dead (null: any), else null. */
  Connection readyConn(Connection dead) {
    synchronized (lock) {
      return closing || conn == dead ? null : conn;
    }
  }

  /** waitConn returns the ready connection, or waits for one other than dead (null: any). */
  CompletableFuture<Connection> waitConn(Connection dead) {
    synchronized (lock) {
      if (closing) return CompletableFuture.failedFuture(new TickwheelException.Closed("call"));
      if (conn != null && conn != dead) return CompletableFuture.completedFuture(conn);
      if (!o.reconnect) return CompletableFuture.failedFuture(new TickwheelException.Disconnected("call", null));
      CompletableFuture<Connection> w = new CompletableFuture<>();
      waiters.add(w);
      return w;
    }
  }

  /** sendOn sends one request on c with id; onOk runs on the I/O thread as the OK reply is read, before later messages. */
  CompletableFuture<List<Value>> sendOn(Connection c, int op, long id, Map<String, ?> args, Consumer<List<Value>> onOk) {
    return sendOn(c, op, id, args, 0, onOk);
  }

  /** sendOn is sendOn with the argument client set to client (0: as args say). */
  CompletableFuture<List<Value>> sendOn(Connection c, int op, long id, Map<String, ?> args, long client,
      Consumer<List<Value>> onOk) {
    CompletableFuture<List<Value>> f = new CompletableFuture<>();
    CompletableFuture<List<Value>> out = f;
    if (onOk != null) {
      out = f.thenApply(r -> {
        onOk.accept(r);
        return r;
      });
    }
    c.send(Protocol.encode(op, id, args, client), new Connection.Pending(Protocol.opName(op), f));
    return out;
  }

  /** sendOn sends one request on c with a new id. */
  CompletableFuture<List<Value>> sendOn(Connection c, int op, Map<String, ?> args, Consumer<List<Value>> onOk) {
    return sendOn(c, op, nextId(), args, onOk);
  }

  /**
   * shutdown stops connecting, fails the callers waiting for a connection with
   * {@link TickwheelException.Closed} and closes the current connection. Idempotent.
   */
  void shutdown() {
    List<CompletableFuture<Connection>> ws;
    Connection c;
    synchronized (lock) {
      closing = true;
      c = conn;
      conn = null;
      ws = new ArrayList<>(waiters);
      waiters.clear();
      if (idlePing != null) idlePing.cancel(false);
    }
    for (CompletableFuture<Connection> w : ws) w.completeExceptionally(new TickwheelException.Closed("call"));
    if (c != null) c.close(new TickwheelException.Closed("close"));
  }
}
