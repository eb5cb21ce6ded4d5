package io.tickwheel.client;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.SubmissionPublisher;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.msgpack.value.Value;

/**
 * Delivery is a client's receivers and their events: which receivers are bound here (to bind
 * them again after a reconnect), each one's last seq (gaps are losses) and acknowledged
 * state, the event queue and the event thread that hands events to the listener and the
 * publisher, the read pause that bounds that queue, and the batched acks. Push and bind
 * replies come in on the I/O thread ({@link #onPush}, {@link #bindReplied}); the event thread
 * runs {@link #eventLoop}; acks and flushes may come from any thread. Owned by its
 * {@link TickwheelClient}, which gives it the current connection and a way to send an ack.
 */
final class Delivery {
  private static final System.Logger LOG = System.getLogger("io.tickwheel.client");
  /**
   * The acks due are sent at once every ACK_BATCH events handled per acknowledged-mode
   * receiver (counting at most 64 receivers), else ACK_DELAY_MS after the first one is due,
   * as the Go client does: one ack covers many events, and the server's outbox stays short.
   */
  private static final int ACK_BATCH = 256;
  private static final long ACK_DELAY_MS = 5;

  /** A bound receiver: how to bind it again. */
  record Bound(boolean ephemeral, AckMode mode) {}

  /** AckSender sends an ack of seq for receiver on c; onOk runs when the server confirms it. */
  @FunctionalInterface
  interface AckSender {
    void send(Connection c, long receiver, long seq, Runnable onOk);
  }

  private final ClientOptions o;
  private final ScheduledExecutorService timer;
  private final Supplier<Connection> current;
  private final AckSender acker;
  private final Object lock = new Object();
  private final LinkedBlockingQueue<Event> queue = new LinkedBlockingQueue<>();
  private volatile boolean readPaused;
  private volatile boolean closing;
  private SubmissionPublisher<Event> publisher; // guarded by lock
  private ScheduledFuture<?> ackFlush; // guarded by lock
  final Map<Long, Bound> bound = new ConcurrentHashMap<>();
  private final Map<Long, Long> lastSeq = new ConcurrentHashMap<>(); // touched on the I/O thread
  private final Map<Long, AckState> acks = new ConcurrentHashMap<>();
  private final Set<Long> ackDirty = ConcurrentHashMap.newKeySet();
  private final AtomicLong ackCount = new AtomicLong();
  final AtomicLong droppedTotal = new AtomicLong();
  final AtomicLong redeliveredTotal = new AtomicLong();
  private volatile int queuedHighWater; // the most events that waited for the event thread at once

  Delivery(ClientOptions o, ScheduledExecutorService timer, Supplier<Connection> current, AckSender acker) {
    this.o = o;
    this.timer = timer;
    this.current = current;
    this.acker = acker;
  }

  boolean readPaused() {
    return readPaused;
  }

  int queuedHighWater() {
    return queuedHighWater;
  }

  /** acked: the highest seq of the receiver the server confirmed acknowledged (0: none, or not in acknowledged mode). */
  long acked(long receiver) {
    AckState st = acks.get(receiver);
    return st == null ? 0 : st.acked();
  }

  /** close: the event loop ends once the queue is empty; the publisher completes. */
  void close() {
    closing = true;
    SubmissionPublisher<Event> p;
    synchronized (lock) {
      p = publisher;
      if (ackFlush != null) ackFlush.cancel(false);
    }
    if (p != null) p.close();
  }


  void onPush(Protocol.Message m) {
    Event e = ((Protocol.Push) m).event();
    if (e instanceof Event.Fire f) {
      long r = f.receiver();
      Long last = lastSeq.get(r);
      AckState st = acks.get(r);
      boolean dup = st != null && st.fire(f.seq());
      if (!dup && last != null && Long.compareUnsigned(f.seq(), last + 1) > 0 && f.seq() != 1) {
        lost(r, f.seq() - last - 1, last + 1, f.seq() - 1);
      }
      if (last == null || Long.compareUnsigned(f.seq(), last) > 0 || f.seq() == 1) lastSeq.put(r, f.seq());
      if (dup) {
        redeliveredTotal.incrementAndGet();
        if (st.waiting()) scheduleAck(r, false); // an ack that waited for this redelivery
        return;
      }
      enqueue(f);
    } else if (e instanceof Event.Takeover t) {
      forget(t.receiver());
      enqueue(t);
    } else if (e instanceof Event.Dropped d) {
      Long last = lastSeq.get(d.receiver());
      if (last == null || Long.compareUnsigned(d.lastSeq(), last) > 0) lastSeq.put(d.receiver(), d.lastSeq());
      if (d.count() > 0) {
        droppedTotal.addAndGet(d.count());
        enqueue(d);
      }
    }
  }

  private void lost(long receiver, long count, long first, long last) {
    droppedTotal.addAndGet(count);
    enqueue(new Event.Dropped(receiver, count, first, last));
  }

  private void enqueue(Event e) {
    queue.add(e);
    int n = queue.size();
    if (n > queuedHighWater) queuedHighWater = n; // written by the I/O thread only
    if (n >= o.eventBuffer && !readPaused) {
      readPaused = true; // then read the connection: ready() reads them the other way round
      Connection c = current.get();
      if (c != null) c.pauseReading();
    }
  }

  void forget(long receiver) {
    bound.remove(receiver);
    lastSeq.remove(receiver);
    acks.remove(receiver);
  }

  void eventLoop() {
    while (!closing || !queue.isEmpty()) {
      Event e;
      try {
        e = queue.poll(100, TimeUnit.MILLISECONDS);
      } catch (InterruptedException ie) {
        if (closing) return;
        continue;
      }
      if (e == null) continue;
      if (readPaused && queue.size() <= o.eventBuffer / 2) {
        readPaused = false;
        Connection c = current.get();
        if (c != null) c.resumeReading();
      }
      deliver(e);
      if (e instanceof Event.Fire f) {
        AckState st = acks.get(f.receiver());
        if (st != null && st.mode == AckMode.AUTO) {
          st.done(f.seq());
          scheduleAck(f.receiver(), true);
        }
      }
    }
  }

  private void deliver(Event e) {
    EventListener l = o.listener;
    if (l != null) {
      try {
        l.onEvent(e);
      } catch (RuntimeException ex) {
        LOG.log(System.Logger.Level.WARNING, "tickwheel: event listener threw", ex);
      }
    }
    SubmissionPublisher<Event> p;
    synchronized (lock) {
      p = publisher;
    }
    if (p != null && !p.isClosed()) {
      try {
        p.submit(e); // blocks while a subscriber's buffer is full: backpressure
      } catch (IllegalStateException closed) {
        // close() closed the publisher meanwhile: the event goes to no subscriber
      }
    }
  }

  /** events: the publisher of every event from now on (made at the first call). */
  Flow.Publisher<Event> events() {
    synchronized (lock) {
      if (publisher == null) {
        publisher = new SubmissionPublisher<>(Executors.newCachedThreadPool(r -> TickwheelClient.daemon(r, "tickwheel-subscriber")),
            o.eventBuffer);
      }
      return publisher;
    }
  }


  private void scheduleAck(long receiver, boolean counted) {
    ackDirty.add(receiver);
    if (counted && ackCount.incrementAndGet() >= (long) ACK_BATCH * Math.min(Math.max(acks.size(), 1), 64)) {
      flushAcks();
      return;
    }
    synchronized (lock) {
      if (ackFlush == null && !closing) ackFlush = timer.schedule(this::flushAcks, ACK_DELAY_MS, TimeUnit.MILLISECONDS);
    }
  }

  /** flushAcks sends the acks due now, one per receiver. */
  void flushAcks() {
    synchronized (lock) {
      if (ackFlush != null) ackFlush.cancel(false);
      ackFlush = null;
    }
    Connection c = current.get();
    ackCount.set(0);
    if (c == null) return;
    for (Long r : List.copyOf(ackDirty)) {
      ackDirty.remove(r);
      AckState st = acks.get(r);
      if (st == null) continue;
      st.sendDue(seq -> acker.send(c, r, seq, () -> st.confirmed(seq)));
    }
  }

  /** ack: the application handled the receiver's events up to seq (batched, cumulative). */
  void ack(long receiver, long seq) {
    AckState st = acks.get(receiver);
    if (st == null) throw new IllegalStateException("tickwheel: ack: receiver " + Long.toUnsignedString(receiver)
        + " is not bound here in acknowledged mode");
    st.done(seq);
    scheduleAck(receiver, true);
  }

  /** bindReplied: a bind's OK reply, on the I/O thread before the events that follow it. */
  void bindReplied(long r, Bound b, List<Value> res) {
    long[] u;
    try {
      u = Protocol.uints(res, 3, "bind result");
    } catch (Protocol.DecodeException e) {
      throw new CompletionException(e);
    }
    bound.put(r, b);
    if (b.mode() != AckMode.NONE) {
      AckState st = acks.computeIfAbsent(r, k -> new AckState(b.mode()));
      st.mode = b.mode();
      st.bound(u[2]);
    } else {
      acks.remove(r);
    }
    if (u[2] > 0) lastSeq.put(r, u[2] - 1);
    else lastSeq.remove(r);
    if (u[1] > 0) lost(r, u[1], 0, 0);
  }
}
