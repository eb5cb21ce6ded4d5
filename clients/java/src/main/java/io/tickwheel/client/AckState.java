package io.tickwheel.client;

/**
 * AckState is what the client keeps of one receiver bound in acknowledged mode: the highest
 * seq the server confirmed acked, the highest the application has finished (want), the
 * highest ack sent on the current connection, the highest seq received since the current
 * connection's bind (an ack may not pass it), and the highest seq handed to the application
 * in this process (a redelivery at or below it is dropped: docs/PROTOCOL.md "Acknowledged
 * delivery"). Shared by the I/O thread, the event thread and callers of ack: every method
 * is synchronized.
 */
final class AckState {
  AckMode mode;
  private long acked;
  private long want;
  private long sent;
  private long seen;
  private long delivered;

  AckState(AckMode mode) {
    this.mode = mode;
  }

  /** bound: a bind on a new connection replied firstSeq. A server that lost its state numbers at or below what was acked. */
  synchronized void bound(long firstSeq) {
    sent = 0;
    seen = 0;
    if (firstSeq > 0 && Long.compareUnsigned(firstSeq, acked) <= 0) {
      acked = 0;
      want = 0;
      delivered = 0;
    }
  }

  /** fire notes an arriving event and reports whether it was handed to the application before. */
  synchronized boolean fire(long seq) {
    if (Long.compareUnsigned(seq, seen) > 0) seen = seq;
    if (Long.compareUnsigned(seq, delivered) <= 0) return true;
    delivered = seq;
    return false;
  }

  /** done: the application finished (or acked) every event up to seq. */
  synchronized void done(long seq) {
    if (Long.compareUnsigned(seq, want) > 0) want = seq;
  }

  /**
   * sendDue hands send the seq to ack on this connection now, if one is due, and marks it
   * sent. send runs under this state's lock, so two threads flushing at once send their
   * acks in increasing order: the one that took the lower seq has sent it before the other
   * can take a higher one. send must not block or wait for another thread that takes this
   * lock (queuing a frame on a connection does neither).
   */
  synchronized void sendDue(java.util.function.LongConsumer send) {
    long s = Long.compareUnsigned(want, seen) < 0 ? want : seen;
    if (Long.compareUnsigned(s, sent) > 0 && Long.compareUnsigned(s, acked) > 0) {
      sent = s;
      send.accept(s);
    }
  }

  /** waiting: an ack is wanted beyond what was sent (a redelivery may make it due). */
  synchronized boolean waiting() {
    return Long.compareUnsigned(want, sent) > 0;
  }

  /** confirmed: the server replied OK to an ack of seq. */
  synchronized void confirmed(long seq) {
    if (Long.compareUnsigned(seq, acked) > 0) acked = seq;
  }

  synchronized long acked() {
    return acked;
  }
}
