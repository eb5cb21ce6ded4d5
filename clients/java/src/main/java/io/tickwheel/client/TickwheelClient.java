package io.tickwheel.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

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

  private final ScheduledExecutorService timer;
  private final Thread eventThread;
  private final Delivery delivery; // the receivers bound here and their events
  private final Link link; // the connection, reconnects and re-binds
  private final Calls calls; // requests with timeouts and retries

  /** queuedHighWater: the most events that waited for the listener at once (tests check the bound). */
  int queuedHighWater() {
    return delivery.queuedHighWater();
  }

  /** acked: the highest seq of the receiver the server confirmed acknowledged (tests wait for it). */
  long acked(long receiver) {
    return delivery.acked(receiver);
  }

  private TickwheelClient(ClientOptions o) {
    this.timer = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "tickwheel-timer"));
    Link[] l = new Link[1]; // the delivery sends acks on the link, which binds the delivery's receivers
    this.delivery = new Delivery(o, timer, () -> l[0].current(), (c, r, seq, onOk) ->
        l[0].sendOn(c, Protocol.ACK, Map.of("receiver", r, "seq", seq), res -> onOk.run())
            .exceptionally(e -> Calls.warn("ack", e)));
    this.link = l[0] = new Link(o, timer, delivery);
    this.calls = new Calls(o, link);
    this.eventThread = daemon(delivery::eventLoop, "tickwheel-events");
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
      c.link.open();
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
    return link.hello();
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
    Connection c = link.current();
    return c == null ? null : c.address();
  }

  /**
   * close flushes the acks due, closes the connection and stops the client's threads;
   * calls still waiting fail with {@link TickwheelException.Closed}. Idempotent.
   */
  @Override
  public void close() {
    if (link.closing()) return;
    delivery.flushAcks();
    Connection c = link.current();
    if (c != null) {
      try { // a ping's reply says the acks before it were read
        link.sendOn(c, Protocol.PING, Map.of(), null).get(1, TimeUnit.SECONDS);
      } catch (Exception ignored) {
        // closing anyway
      }
    }
    shutdown();
  }

  private void shutdown() {
    link.shutdown();
    delivery.close();
    timer.shutdownNow();
    eventThread.interrupt();
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
    return Calls.map(calls.call(Protocol.BIND, Link.bindArgs(receiver, b), res -> delivery.bindReplied(receiver, b, res)), r -> {
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
    return calls.call(Protocol.UNBIND, Map.of("receiver", receiver), r -> delivery.forget(receiver)).thenApply(r -> null);
  }

  private CompletableFuture<Long> addWith(Map<String, Object> a) {
    return Calls.map(calls.call(Protocol.ADD, a, null), r -> Protocol.uints(r, 1, "add result")[0]);
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
    long tickNs = Math.max(1, link.hello().tickNs());
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
    return calls.call(Protocol.CANCEL, Map.of("receiver", receiver, "tid", tid), null).thenApply(r -> null);
  }

  /**
   * cancelAll removes every timer of the receiver.
   *
   * @param receiver the receiver
   * @return how many were cancelled
   */
  public CompletableFuture<Long> cancelAll(long receiver) {
    return Calls.map(calls.call(Protocol.CANCEL_ALL, Map.of("receiver", receiver), null), r -> Protocol.uints(r, 1, "cancel_all")[0]);
  }

  /**
   * pause freezes the ticks a timer has left.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return done; fails with NotFound, or BadState when already paused
   */
  public CompletableFuture<Void> pause(long receiver, long tid) {
    return calls.call(Protocol.PAUSE, Map.of("receiver", receiver, "tid", tid), null).thenApply(r -> null);
  }

  /**
   * resume continues a paused timer with the ticks it had left (a cron timer: on its schedule).
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return done; fails with NotFound, or BadState when it runs
   */
  public CompletableFuture<Void> resume(long receiver, long tid) {
    return calls.call(Protocol.RESUME, Map.of("receiver", receiver, "tid", tid), null).thenApply(r -> null);
  }

  /**
   * get returns a timer.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @return the timer; fails with NotFound
   */
  public CompletableFuture<Timer> get(long receiver, long tid) {
    return Calls.map(calls.call(Protocol.GET, Map.of("receiver", receiver, "tid", tid), null), r -> {
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
    return Calls.map(calls.call(Protocol.LIST, Map.of("receiver", receiver, "from_tid", fromTid, "limit", limit), null),
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
    return Calls.map(calls.call(Protocol.CANCEL_GROUP, Map.of("group", group), null), r -> Protocol.uints(r, 1, "cancel_group")[0]);
  }

  private CompletableFuture<Long> bulk(int op, long receiver, long group) {
    return Calls.map(calls.call(op, Map.of("receiver", receiver, "group", group), null),
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
    return Calls.map(calls.call(Protocol.LIST_GROUP, a, null), r -> {
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
    return Calls.map(calls.call(Protocol.PING, Map.of(), null), r -> Protocol.uints(r, 1, "ping")[0]);
  }

  /**
   * fastForward (admin) advances tw-time by ticks, firing everything due on the way; its
   * events for receivers bound here arrive before the reply.
   *
   * @param ticks how far
   * @return the new tw-time and the firings it caused
   */
  public CompletableFuture<FastForwardResult> fastForward(long ticks) {
    return Calls.map(calls.call(Protocol.FAST_FORWARD, Map.of("ticks", ticks), null), r -> {
      long[] u = Protocol.uints(r, 2, "fast_forward");
      return new FastForwardResult(u[0], u[1]);
    });
  }

  /**
   * freeze (admin) stops tw-time following the clock.
   * @return tw-time
   */
  public CompletableFuture<Long> freeze() {
    return Calls.map(calls.call(Protocol.FREEZE, Map.of(), null), r -> Protocol.uints(r, 1, "freeze")[0]);
  }

  /**
   * resumeSync (admin) lets tw-time follow the clock again, from where it is.
   * @return tw-time
   */
  public CompletableFuture<Long> resumeSync() {
    return Calls.map(calls.call(Protocol.RESUME_SYNC, Map.of(), null), r -> Protocol.uints(r, 1, "resume_sync")[0]);
  }

  /**
   * setSpeed (admin) runs tw-time speed times real time.
   *
   * @param speed 0.001 to 1e6
   * @return tw-time
   */
  public CompletableFuture<Long> setSpeed(double speed) {
    return Calls.map(calls.call(Protocol.SET_SPEED, Map.of("speed", speed), null), r -> Protocol.uints(r, 1, "set_speed")[0]);
  }

  /**
   * stats (admin) returns the server's counters by wire name: uints as Long (unsigned),
   * speed as Double, frozen as Boolean, a cluster node's role and leader as String.
   *
   * @return the stats map
   */
  public CompletableFuture<Map<String, Object>> stats() {
    return Calls.map(calls.call(Protocol.STATS, Map.of(), null), r -> Protocol.map(r, "stats"));
  }

  /**
   * cluster (admin, on a cluster's leader) runs a cluster command: "status", "add"
   * (node, raft addr), "remove" (node) or "check". A single server answers BadState.
   *
   * @param command status, add, remove or check
   * @param node the node id, or ""
   * @param addr the raft address, or ""
   * @return the cluster's state after the command
   */
  public CompletableFuture<ClusterStatus> cluster(String command, String node, String addr) {
    return Calls.map(calls.call(Protocol.CLUSTER, Map.of("command", command, "node", node, "addr", addr), null),
        Protocol::clusterStatus);
  }

  /**
   * clusterStatus asks cluster "status".
   * @return the cluster's state
   */
  public CompletableFuture<ClusterStatus> clusterStatus() {
    return cluster("status", "", "");
  }

  /**
   * clusterCheck asks cluster "check": the leader marks its replicated log and every node
   * hashes its state at the mark. It completes once the mark is committed, with the check's
   * id in {@link ClusterStatus#check()}; each node's digest for it is on that node's status
   * page (/status.json, cluster.state_check), and they must all be equal
   * (docs/OPERATIONS.md, "Checking that the nodes agree").
   *
   * @return the cluster's state, with the check's id
   */
  public CompletableFuture<ClusterStatus> clusterCheck() {
    return cluster("check", "", "");
  }
}
