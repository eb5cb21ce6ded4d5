package io.tickwheel.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.msgpack.value.Value;

/**
 * TickwheelClient is a thread-safe client of a tickwheel server (wire version 1,
 * docs/PROTOCOL.md). Every operation returns a {@link CompletableFuture}; calls from any
 * thread are pipelined over one connection (many requests per write), and replies complete
 * their futures on the client's I/O thread: do not block in a dependent stage (use the
 * {@code *Async} variants for slow work).
 *
 * <p>Events (fires, takeovers, dropped counts) go to the {@link ClientOptions#listener} and to
 * subscribers of {@link #events()}, in order, on one event thread; a slow consumer makes the
 * client stop reading the socket, so the server holds events back (never lost).
 *
 * <p>When the connection drops the client reconnects with backoff (following not_leader to
 * a cluster's leader), says hello and binds its receivers again. Events the server gave up
 * on arrive as {@link Event.Dropped} (and add up in {@link #dropped()}); in acknowledged mode
 * events delivered again are filtered out (counted in {@link #redelivered()}). Calls in
 * flight when it dropped fail with {@link TickwheelException.Disconnected}: a change may or
 * may not have been applied. Reads answered not_leader are asked again on the next
 * connection. On a server that remembers request ids (hello's {@code request_id_ticks}) the
 * changes (add, cancel, cancelAll, pause, resume) carry a random client id and a request id,
 * and are sent again with the same ids after not_leader or a lost connection, within the
 * request timeout: the server applies each at most once and the caller sees one reply.
 *
 * <p>uint64 values are {@code long}s read as unsigned. Close it with {@link #close()}.
 */
public final class TickwheelClient implements AutoCloseable {
  /** The repeat of a timer that fires until cancelled. */
  public static final long FOREVER = 0;

  private static final System.Logger LOG = System.getLogger("io.tickwheel.client");
  private static final Set<Integer> SAFE_TO_RETRY = Set.of(Protocol.GET, Protocol.LIST, Protocol.PING,
      Protocol.STATS, Protocol.CLUSTER, Protocol.LIST_GROUP);
  /** The changes: sent with a request id, and again after not_leader or a lost connection, on a server that remembers request ids. */
  private static final Set<Integer> CHANGES = Set.of(Protocol.ADD, Protocol.CANCEL, Protocol.CANCEL_ALL,
      Protocol.PAUSE, Protocol.RESUME);

  private final ClientOptions o;
  private final ScheduledExecutorService timer;
  private final Thread eventThread;
  private final Delivery delivery; // the receivers bound here and their events
  private final Object lock = new Object();
  private final List<CompletableFuture<Connection>> waiters = new ArrayList<>(); // guarded by lock
  private Connection conn; // the ready connection; guarded by lock
  private boolean reconnecting; // guarded by lock
  private String hint = ""; // a leader named by not_leader; guarded by lock
  private volatile boolean closing;
  private volatile HelloInfo hello;
  private final AtomicLong ids = new AtomicLong(); // request ids: never reused in the client's life
  /** This client's id for request ids: random, non-zero, the same across reconnections. */
  private final long clientId = newClientId();
  private ScheduledFuture<?> idlePing; // guarded by lock

  /** queuedHighWater: the most events that waited for the listener at once (tests check the bound). */
  int queuedHighWater() {
    return delivery.queuedHighWater();
  }

  /** acked: the highest seq of the receiver the server confirmed acknowledged (tests wait for it). */
  long acked(long receiver) {
    return delivery.acked(receiver);
  }

  private static long newClientId() {
    java.security.SecureRandom r = new java.security.SecureRandom();
    for (;;) {
      long id = r.nextLong();
      if (id != 0) return id;
    }
  }

  private TickwheelClient(ClientOptions o) {
    this.o = o;
    this.timer = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "tickwheel-timer"));
    this.delivery = new Delivery(o, timer, this::current, (c, r, seq, onOk) ->
        sendOn(c, Protocol.ACK, Map.of("receiver", r, "seq", seq), res -> onOk.run()).exceptionally(e -> warn("ack", e)));
    this.eventThread = daemon(delivery::eventLoop, "tickwheel-events");
  }

  private Connection current() {
    synchronized (lock) {
      return conn;
    }
  }

  static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  /**
   * connect connects to the first reachable address of the options (following not_leader),
   * says hello and returns the ready client. It blocks the caller.
   *
   * @param o the options
   * @return the client
   * @throws TickwheelException when no address could be connected (the last error as cause),
   *     or the server refused the hello (unauthorized, unsupported_version)
   */
  public static TickwheelClient connect(ClientOptions o) {
    TickwheelClient c = new TickwheelClient(o);
    try {
      c.open();
    } catch (TickwheelException e) {
      c.shutdown();
      throw e;
    }
    c.eventThread.start();
    return c;
  }

  /**
   * connect connects to addresses ("host:port" or "a:7420,b:7420") with default options.
   *
   * @param addresses the server's address, or a cluster's
   * @return the client
   */
  public static TickwheelClient connect(String addresses) {
    return connect(new ClientOptions(addresses));
  }

  // ---- connections ----

  /** open connects, says hello and binds the receivers again; the connection is then ready. */
  private void open() {
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
          .exceptionally(e -> warn("bind again", e));
    }
    return c;
  }

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

  /** waitConn returns the ready connection, or waits for one other than dead (null: any). */
  private CompletableFuture<Connection> waitConn(Connection dead) {
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
  private CompletableFuture<List<Value>> sendOn(Connection c, int op, long id, Map<String, ?> args,
      java.util.function.Consumer<List<Value>> onOk) {
    CompletableFuture<List<Value>> f = new CompletableFuture<>();
    CompletableFuture<List<Value>> out = f;
    if (onOk != null) {
      out = f.thenApply(r -> {
        onOk.accept(r);
        return r;
      });
    }
    c.send(Protocol.encode(op, id, args), new Connection.Pending(Protocol.opName(op), f));
    return out;
  }

  private CompletableFuture<List<Value>> sendOn(Connection c, int op, Map<String, ?> args,
      java.util.function.Consumer<List<Value>> onOk) {
    return sendOn(c, op, ids.incrementAndGet(), args, onOk);
  }

  /**
   * call sends one request on the ready connection (waiting for one), with the request
   * timeout. A read answered not_leader is asked again on the next connection. So is a
   * change (add, cancel, cancel_all, pause, resume), and also after its connection dropped
   * with it in flight, when the server remembers request ids (its hello's request_id_ticks):
   * it then carries this client's id and the same request id on every attempt, and the
   * server applies it at most once, answering a retry of one it applied with the first
   * reply (docs/PROTOCOL.md "Retrying changes"). Elsewhere a change's NotLeader or
   * Disconnected goes to the caller: it may have been applied.
   */
  private CompletableFuture<List<Value>> call(int op, Map<String, ?> args, java.util.function.Consumer<List<Value>> onOk) {
    CompletableFuture<List<Value>> result = new CompletableFuture<>();
    attempt(op, args, onOk, result, CHANGES.contains(op) ? new long[1] : null, null);
    if (o.requestTimeout != null && !o.requestTimeout.isZero()) {
      result.orTimeout(o.requestTimeout.toMillis(), TimeUnit.MILLISECONDS);
    }
    return result;
  }

  /**
   * attempt sends the request once and retries as call says. change is null for a request
   * that is no change, else holds its request id (0 until the first attempt on a server
   * that remembers request ids fixes it); dead is the connection the last attempt failed
   * on, which a retry does not use again.
   */
  private void attempt(int op, Map<String, ?> args, java.util.function.Consumer<List<Value>> onOk,
      CompletableFuture<List<Value>> result, long[] change, Connection dead) {
    waitConn(dead).whenComplete((c, err) -> {
      if (err != null) {
        result.completeExceptionally(err);
        return;
      }
      CompletableFuture<List<Value>> sent;
      if (change == null) {
        sent = sendOn(c, op, args, onOk);
      } else {
        HelloInfo h = hello; // the hello of c: a new one is said only once c is gone
        boolean dedup = h != null && h.limits().getOrDefault("request_id_ticks", 0L) != 0;
        if (change[0] != 0 && !dedup) {
          result.completeExceptionally(new TickwheelException.Disconnected(Protocol.opName(op),
              new java.io.IOException("the change may have been applied, and " + c.address()
                  + " does not deduplicate a retry (no request_id_ticks)")));
          return;
        }
        Map<String, Object> a = new HashMap<>(args);
        if (dedup) {
          if (change[0] == 0) change[0] = ids.incrementAndGet();
          a.put("client", clientId);
          sent = sendOn(c, op, change[0], a, onOk);
        } else {
          sent = sendOn(c, op, a, onOk);
        }
      }
      sent.whenComplete((r, e) -> {
        Throwable cause = e instanceof CompletionException ? e.getCause() : e;
        boolean retry = change != null && change[0] != 0
            ? cause instanceof TickwheelException.NotLeader || cause instanceof TickwheelException.Disconnected
            : cause instanceof TickwheelException.NotLeader && SAFE_TO_RETRY.contains(op);
        if (cause == null) {
          result.complete(r);
        } else if (retry && o.reconnect && !result.isDone() && !closing) {
          attempt(op, args, onOk, result, change, c);
        } else {
          result.completeExceptionally(cause);
        }
      });
    });
  }

  /** A decoder of a result. */
  @FunctionalInterface
  private interface Dec<T> {
    T apply(List<Value> r) throws Protocol.DecodeException;
  }

  private static <T> CompletableFuture<T> map(CompletableFuture<List<Value>> f, Dec<T> d) {
    return f.thenApply(r -> {
      try {
        return d.apply(r);
      } catch (Protocol.DecodeException e) {
        throw new CompletionException(e);
      }
    });
  }

  private static <T> T warn(String what, Throwable e) {
    Throwable c = e instanceof CompletionException ? e.getCause() : e;
    if (!(c instanceof TickwheelException.Disconnected) && !(c instanceof TickwheelException.Closed)) {
      LOG.log(System.Logger.Level.WARNING, "tickwheel: " + what + ": " + c);
    }
    return null;
  }

  // ---- events and acks ----

  /**
   * events returns a publisher of every event from now on, in order. Subscribers get them
   * through their own buffer of {@link ClientOptions#eventBuffer} events; a subscriber that
   * requests slowly holds the event thread, and so the socket, back. In {@link AckMode#AUTO}
   * an event counts as handled once it is in every subscriber's buffer: use
   * {@link AckMode#MANUAL} with a publisher to ack after the work is done.
   *
   * @return the publisher (the same one on every call)
   */
  public Flow.Publisher<Event> events() {
    return delivery.events();
  }

  /**
   * ack acknowledges every event of the receiver up to seq (acknowledged mode): the server
   * forgets them. Acks are cumulative and batched (a few ms); one covering events of an
   * earlier connection goes out once their redelivery has reached this one.
   *
   * @param receiver a receiver bound here in acknowledged mode
   * @param seq the highest seq handled
   * @throws IllegalStateException when the receiver is not bound here in acknowledged mode
   */
  public void ack(long receiver, long seq) {
    delivery.ack(receiver, seq);
  }

  // ---- state ----

  /**
   * @return the server's reply to the latest hello
   */
  public HelloInfo hello() {
    return hello;
  }

  /**
   * @return events the server gave up on or that were lost, over the client's life
   */
  public long dropped() {
    return delivery.droppedTotal.get();
  }

  /**
   * @return events delivered again in acknowledged mode that the client filtered out
   */
  public long redelivered() {
    return delivery.redeliveredTotal.get();
  }

  /**
   * @return the address of the current connection, or null while disconnected
   */
  public String address() {
    synchronized (lock) {
      return conn == null ? null : conn.address();
    }
  }

  /**
   * close flushes the acks due, closes the connection and stops the client's threads;
   * calls still waiting fail with {@link TickwheelException.Closed}. Idempotent.
   */
  @Override
  public void close() {
    if (closing) return;
    delivery.flushAcks();
    Connection c;
    synchronized (lock) {
      c = conn;
    }
    if (c != null) {
      try { // a ping's reply says the acks before it were read
        sendOn(c, Protocol.PING, Map.of(), null).get(1, TimeUnit.SECONDS);
      } catch (Exception ignored) {
        // closing anyway
      }
    }
    shutdown();
  }

  private void shutdown() {
    List<CompletableFuture<Connection>> ws;
    Connection c;
    synchronized (lock) {
      closing = true;
      c = conn;
      conn = null;
      ws = new ArrayList<>(waiters);
      waiters.clear();
    }
    for (CompletableFuture<Connection> w : ws) w.completeExceptionally(new TickwheelException.Closed("call"));
    if (c != null) c.close(new TickwheelException.Closed("close"));
    delivery.close();
    timer.shutdownNow();
    eventThread.interrupt();
  }

  // ---- ops ----

  private static Map<String, Object> bindArgs(long receiver, Delivery.Bound b) {
    Map<String, Object> a = new HashMap<>();
    a.put("receiver", receiver);
    a.put("ephemeral", b.ephemeral());
    a.put("ack", b.mode() != AckMode.NONE);
    return a;
  }

  /**
   * bind makes this client the receiver's destination (taking it over from any other
   * session) in plain mode. Its queued events follow; the client binds it again after
   * each reconnect.
   *
   * @param receiver the receiver
   * @return the bind's reply
   */
  public CompletableFuture<BindResult> bind(long receiver) {
    return bind(receiver, AckMode.NONE, false);
  }

  /**
   * bind binds the receiver with an ack mode; an ephemeral bind cancels its timers when this
   * session closes.
   *
   * @param receiver the receiver
   * @param mode NONE (plain), AUTO or MANUAL (acknowledged mode)
   * @param ephemeral whether its timers go with this session
   * @return the bind's reply (its dropped count also arrives as an {@link Event.Dropped})
   */
  public CompletableFuture<BindResult> bind(long receiver, AckMode mode, boolean ephemeral) {
    Delivery.Bound b = new Delivery.Bound(ephemeral, mode);
    return map(call(Protocol.BIND, bindArgs(receiver, b), res -> delivery.bindReplied(receiver, b, res)), r -> {
      long[] u = Protocol.uints(r, 3, "bind result");
      return new BindResult(u[0], u[1], u[2]);
    });
  }

  /**
   * unbind stops the receiver's events coming here (acks due are sent first); its timers stay.
   *
   * @param receiver the receiver
   * @return done; fails with NotFound when it is not bound here
   */
  public CompletableFuture<Void> unbind(long receiver) {
    delivery.flushAcks();
    return call(Protocol.UNBIND, Map.of("receiver", receiver), r -> delivery.forget(receiver)).thenApply(r -> null);
  }

  private CompletableFuture<Long> addWith(Map<String, Object> a) {
    return map(call(Protocol.ADD, a, null), r -> Protocol.uints(r, 1, "add result")[0]);
  }

  /**
   * add adds timer (receiver, tid) firing once in afterTicks ticks (0: at the next tick).
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param afterTicks ticks from now
   * @return the tick of its first firing
   */
  public CompletableFuture<Long> add(long receiver, long tid, long afterTicks) {
    return add(receiver, tid, afterTicks, AddOptions.defaults());
  }

  /**
   * add adds timer (receiver, tid) firing first in afterTicks ticks, then as the options say.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param afterTicks ticks from now
   * @param opts every, repeat, data, replace, missed
   * @return the tick of its first firing
   */
  public CompletableFuture<Long> add(long receiver, long tid, long afterTicks, AddOptions opts) {
    Map<String, Object> a = AddOptions.base(receiver, tid);
    opts.into(a);
    a.put("after", afterTicks);
    return addWith(a);
  }

  /**
   * addAt adds a timer whose first firing is at tick {@code at} (at or before now: the next tick).
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param at the tick
   * @param opts every, repeat, data, replace, missed
   * @return the tick of its first firing
   */
  public CompletableFuture<Long> addAt(long receiver, long tid, long at, AddOptions opts) {
    Map<String, Object> a = AddOptions.base(receiver, tid);
    opts.into(a);
    a.put("at", at);
    return addWith(a);
  }

  /**
   * addAfter adds a timer firing after a duration of tw-time (sent as {@code after_ns}, and as
   * {@code after} rounded up to ticks for servers that predate it): at speed 1 it never fires
   * before d has passed.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param d the delay
   * @param opts every, repeat, data, replace, missed
   * @return the tick of its first firing
   */
  public CompletableFuture<Long> addAfter(long receiver, long tid, Duration d, AddOptions opts) {
    if (d.isNegative()) throw new IllegalArgumentException("tickwheel: addAfter: negative duration " + d);
    long ns = d.toNanos();
    long tickNs = Math.max(1, hello.tickNs());
    Map<String, Object> a = AddOptions.base(receiver, tid);
    opts.into(a);
    a.put("after", ns / tickNs + (ns % tickNs == 0 ? 0 : 1));
    a.put("after_ns", ns);
    return addWith(a);
  }

  /**
   * addAfter adds a one-shot timer firing after d.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param d the delay
   * @return the tick of its first firing
   */
  public CompletableFuture<Long> addAfter(long receiver, long tid, Duration d) {
    return addAfter(receiver, tid, d, AddOptions.defaults());
  }

  /**
   * addSchedule adds a timer firing on a cron schedule ("0 4 * * *", "@daily",
   * "@every 90s") read in an IANA zone ("" = UTC); repeat counts firings (default: once,
   * {@link AddOptions#forever()} for every time).
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param schedule the cron expression or descriptor
   * @param zone the time zone, or ""
   * @param opts repeat, data, replace, missed (every must stay 0)
   * @return the tick of its first firing
   */
  public CompletableFuture<Long> addSchedule(long receiver, long tid, String schedule, String zone, AddOptions opts) {
    Map<String, Object> a = AddOptions.base(receiver, tid);
    opts.into(a);
    a.put("schedule", schedule);
    a.put("zone", zone == null ? "" : zone);
    return addWith(a);
  }

  /**
   * cancel removes a timer.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return done; fails with NotFound when there is none
   */
  public CompletableFuture<Void> cancel(long receiver, long tid) {
    return call(Protocol.CANCEL, Map.of("receiver", receiver, "tid", tid), null).thenApply(r -> null);
  }

  /**
   * cancelAll removes every timer of the receiver.
   *
   * @param receiver the receiver
   * @return how many were cancelled
   */
  public CompletableFuture<Long> cancelAll(long receiver) {
    return map(call(Protocol.CANCEL_ALL, Map.of("receiver", receiver), null), r -> Protocol.uints(r, 1, "cancel_all")[0]);
  }

  /**
   * pause freezes the ticks a timer has left.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return done; fails with NotFound, or BadState when already paused
   */
  public CompletableFuture<Void> pause(long receiver, long tid) {
    return call(Protocol.PAUSE, Map.of("receiver", receiver, "tid", tid), null).thenApply(r -> null);
  }

  /**
   * resume continues a paused timer with the ticks it had left (a cron timer: on its schedule).
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return done; fails with NotFound, or BadState when it runs
   */
  public CompletableFuture<Void> resume(long receiver, long tid) {
    return call(Protocol.RESUME, Map.of("receiver", receiver, "tid", tid), null).thenApply(r -> null);
  }

  /**
   * get returns a timer.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return the timer; fails with NotFound
   */
  public CompletableFuture<Timer> get(long receiver, long tid) {
    return map(call(Protocol.GET, Map.of("receiver", receiver, "tid", tid), null), r -> {
      if (r.isEmpty()) throw new Protocol.DecodeException("get: empty result");
      return Protocol.timer(r.get(0));
    });
  }

  /**
   * list returns one page of the receiver's timers with tid at or above fromTid.
   *
   * @param receiver the receiver
   * @param fromTid the first tid (0, then each page's next)
   * @param limit at most this many (0: the server's max_list_page)
   * @return the page
   */
  public CompletableFuture<ListPage> list(long receiver, long fromTid, long limit) {
    return map(call(Protocol.LIST, Map.of("receiver", receiver, "from_tid", fromTid, "limit", limit), null),
        Protocol::listPage);
  }

  /**
   * listAll pages through every timer of the receiver (pages are not a snapshot: a timer
   * living throughout is seen exactly once).
   *
   * @param receiver the receiver
   * @return the timers in tid order
   */
  public CompletableFuture<List<Timer>> listAll(long receiver) {
    List<Timer> out = new ArrayList<>();
    return listFrom(receiver, 0, out).thenApply(v -> out);
  }

  private CompletableFuture<Void> listFrom(long receiver, long from, List<Timer> out) {
    return list(receiver, from, 0).thenCompose(p -> {
      out.addAll(p.timers());
      return p.next() == 0 ? CompletableFuture.completedFuture(null) : listFrom(receiver, p.next(), out);
    });
  }

  /**
   * pauseAll pauses every running timer of the receiver, each keeping the ticks it had left
   * (as {@link #pause} does), and marks the receiver paused: timers added to it later start
   * paused until {@link #resumeAll}. The server does a large one in chunks between its other
   * work; it covers the timers there when it began.
   *
   * @param receiver the receiver
   * @return how many it paused; fails with Unauthorized under add_only_bound for a receiver
   *     not bound here, UnknownOp from a server that predates bulk operations
   */
  public CompletableFuture<Long> pauseAll(long receiver) {
    return bulk(Protocol.PAUSE_ALL, receiver, 0);
  }

  /**
   * resumeAll resumes every paused timer of the receiver (however it was paused), each with
   * the ticks it had left, and clears the receiver's paused mark.
   *
   * @param receiver the receiver
   * @return how many it resumed
   */
  public CompletableFuture<Long> resumeAll(long receiver) {
    return bulk(Protocol.RESUME_ALL, receiver, 0);
  }

  /**
   * pauseGroup pauses every running timer of the group (whatever their receivers), each
   * keeping the ticks it had left, and marks the group paused: timers added to it later start
   * paused until {@link #resumeGroup}.
   *
   * @param group the group, not 0
   * @return how many it paused; under add_only_bound fails with Unauthorized unless every
   *     receiver with timers in the group is bound here
   * @throws IllegalArgumentException for group 0 (on the wire it would mean receiver 0's timers)
   */
  public CompletableFuture<Long> pauseGroup(long group) {
    return bulk(Protocol.PAUSE_ALL, 0, needGroup(group));
  }

  /**
   * resumeGroup resumes every paused timer of the group, each with the ticks it had left,
   * and clears the group's paused mark.
   *
   * @param group the group, not 0
   * @return how many it resumed
   * @throws IllegalArgumentException for group 0
   */
  public CompletableFuture<Long> resumeGroup(long group) {
    return bulk(Protocol.RESUME_ALL, 0, needGroup(group));
  }

  /**
   * cancelGroup removes every timer of the group, whatever their receivers.
   *
   * @param group the group, not 0
   * @return how many it removed; UnknownOp from a server that predates groups
   * @throws IllegalArgumentException for group 0
   */
  public CompletableFuture<Long> cancelGroup(long group) {
    needGroup(group);
    return map(call(Protocol.CANCEL_GROUP, Map.of("group", group), null), r -> Protocol.uints(r, 1, "cancel_group")[0]);
  }

  private CompletableFuture<Long> bulk(int op, long receiver, long group) {
    return map(call(op, Map.of("receiver", receiver, "group", group), null),
        r -> Protocol.uints(r, 1, Protocol.opName(op))[0]);
  }

  private static long needGroup(long group) {
    if (group == 0) throw new IllegalArgumentException("tickwheel: group 0 is no group: name one");
    return group;
  }

  /**
   * listGroupPage returns one page of the group's live timers from (fromReceiver, fromTid)
   * on, in (receiver, tid) order.
   *
   * @param group the group (an unknown one has no timers)
   * @param fromReceiver the first receiver (0, then each page's nextReceiver)
   * @param fromTid the first tid within it (0, then each page's nextTid)
   * @param limit at most this many (0: the server's max_list_page)
   * @return the page; fails with a DecodeException cause if the server's next cursor does
   *     not move past the page (which would have {@link #listGroup} loop forever)
   */
  public CompletableFuture<GroupPage> listGroupPage(long group, long fromReceiver, long fromTid, long limit) {
    Map<String, Object> a = Map.of("group", group, "from_receiver", fromReceiver, "from_tid", fromTid, "limit", limit);
    return map(call(Protocol.LIST_GROUP, a, null), r -> {
      GroupPage p = Protocol.groupPage(r);
      Timer last = p.timers().isEmpty() ? null : p.timers().get(p.timers().size() - 1);
      if (p.hasMore() && (!after(p.nextReceiver(), p.nextTid(), fromReceiver, fromTid)
          || last != null && !after(p.nextReceiver(), p.nextTid(), last.receiver(), last.tid()))) {
        throw new Protocol.DecodeException("list_group: next (" + Long.toUnsignedString(p.nextReceiver()) + ", "
            + Long.toUnsignedString(p.nextTid()) + ") is not past the cursor and the page");
      }
      return p;
    });
  }

  /** after: whether key (r1, t1) is past (r2, t2), as unsigned numbers. */
  private static boolean after(long r1, long t1, long r2, long t2) {
    int c = Long.compareUnsigned(r1, r2);
    return c > 0 || c == 0 && Long.compareUnsigned(t1, t2) > 0;
  }

  /**
   * listGroup pages through every live timer of the group (pages are not a snapshot: a
   * timer living throughout is seen exactly once).
   *
   * @param group the group
   * @return the timers in (receiver, tid) order
   */
  public CompletableFuture<List<Timer>> listGroup(long group) {
    List<Timer> out = new ArrayList<>();
    return listGroupFrom(group, 0, 0, out).thenApply(v -> out);
  }

  private CompletableFuture<Void> listGroupFrom(long group, long r, long t, List<Timer> out) {
    return listGroupPage(group, r, t, 0).thenCompose(p -> {
      out.addAll(p.timers());
      return p.hasMore() ? listGroupFrom(group, p.nextReceiver(), p.nextTid(), out) : CompletableFuture.completedFuture(null);
    });
  }

  /**
   * ping asks for tw-time.
   *
   * @return the current tick
   */
  public CompletableFuture<Long> ping() {
    return map(call(Protocol.PING, Map.of(), null), r -> Protocol.uints(r, 1, "ping")[0]);
  }

  /**
   * fastForward (admin) advances tw-time by ticks, firing everything due on the way; its
   * events for receivers bound here arrive before the reply.
   *
   * @param ticks how far
   * @return the new tw-time and the firings it caused
   */
  public CompletableFuture<FastForwardResult> fastForward(long ticks) {
    return map(call(Protocol.FAST_FORWARD, Map.of("ticks", ticks), null), r -> {
      long[] u = Protocol.uints(r, 2, "fast_forward");
      return new FastForwardResult(u[0], u[1]);
    });
  }

  /**
   * freeze (admin) stops tw-time following the clock.
   * @return tw-time
   */
  public CompletableFuture<Long> freeze() {
    return map(call(Protocol.FREEZE, Map.of(), null), r -> Protocol.uints(r, 1, "freeze")[0]);
  }

  /**
   * resumeSync (admin) lets tw-time follow the clock again, from where it is.
   * @return tw-time
   */
  public CompletableFuture<Long> resumeSync() {
    return map(call(Protocol.RESUME_SYNC, Map.of(), null), r -> Protocol.uints(r, 1, "resume_sync")[0]);
  }

  /**
   * setSpeed (admin) runs tw-time speed times real time.
   *
   * @param speed 0.001 to 1e6
   * @return tw-time
   */
  public CompletableFuture<Long> setSpeed(double speed) {
    return map(call(Protocol.SET_SPEED, Map.of("speed", speed), null), r -> Protocol.uints(r, 1, "set_speed")[0]);
  }

  /**
   * stats (admin) returns the server's counters by wire name: uints as Long (unsigned),
   * speed as Double, frozen as Boolean, a cluster node's role and leader as String.
   *
   * @return the stats map
   */
  public CompletableFuture<Map<String, Object>> stats() {
    return map(call(Protocol.STATS, Map.of(), null), r -> Protocol.map(r, "stats"));
  }

  /**
   * cluster (admin, on a cluster's leader) runs a membership command: "status", "add"
   * (node, raft addr) or "remove" (node). A single server answers BadState.
   *
   * @param command status, add or remove
   * @param node the node id, or ""
   * @param addr the raft address, or ""
   * @return the cluster's state after the command
   */
  public CompletableFuture<ClusterStatus> cluster(String command, String node, String addr) {
    return map(call(Protocol.CLUSTER, Map.of("command", command, "node", node, "addr", addr), null),
        TickwheelClient::clusterStatus);
  }

  /**
   * clusterStatus asks cluster "status".
   * @return the cluster's state
   */
  public CompletableFuture<ClusterStatus> clusterStatus() {
    return cluster("status", "", "");
  }

  static ClusterStatus clusterStatus(List<Value> r) throws Protocol.DecodeException {
    Map<String, Object> m = Protocol.map(r, "cluster");
    List<ClusterStatus.Member> members = new ArrayList<>();
    Object ms = m.get("members");
    if (ms instanceof List<?> l) {
      for (Object x : l) {
        if (x instanceof Map<?, ?> mm) {
          members.add(new ClusterStatus.Member(String.valueOf(mm.get("id")), String.valueOf(mm.get("raft_addr")),
              Boolean.TRUE.equals(mm.get("voter"))));
        }
      }
    }
    return new ClusterStatus(String.valueOf(m.getOrDefault("role", "")), String.valueOf(m.getOrDefault("leader", "")),
        num(m.get("term")), num(m.get("commit_index")), num(m.get("applied_index")), List.copyOf(members));
  }

  private static long num(Object o) {
    return o instanceof Long l ? l : 0;
  }
}
