package io.tickwheel.client;

/**
 * Event is what the server pushes for the receivers this client has bound: a {@link Fire},
 * a {@link Takeover} or a {@link Dropped} count. Events of one receiver arrive in firing
 * order. All uint64 fields are {@code long}s read as unsigned.
 */
public sealed interface Event permits Event.Fire, Event.Takeover, Event.Dropped {
  /**
   * The receiver the event is for.
   *
   * @return the receiver
   */
  long receiver();

  /**
   * Fire: timer {@code (receiver, tid)} fired for tick {@code tick}, its {@code fired}-th
   * firing of {@code repeat} (0 = forever); {@code last} when it removed the timer;
   * {@code data} the add's data or null; {@code seq} numbers the receiver's events;
   * {@code late} ticks between due and sent.
   *
   * @param receiver the receiver
   * @param tid the timer id
   * @param tick the tick it was due at
   * @param fired its 1-based firing count
   * @param repeat total firings, 0 = forever
   * @param last whether this firing removed the timer
   * @param data the add's data, or null
   * @param seq the receiver's event number
   * @param late ticks of tw-time between due and numbered
   */
  record Fire(long receiver, long tid, long tick, long fired, long repeat, boolean last,
      byte[] data, long seq, long late) implements Event {}

  /**
   * Takeover: another session ({@code session}) bound the receiver; this client gets no
   * more of its events and no longer binds it on reconnect.
   *
   * @param receiver the receiver
   * @param session the session that has it now
   */
  record Takeover(long receiver, long session) implements Event {}

  /**
   * Dropped: {@code count} events of the receiver will never arrive: the server dropped
   * them (a full queue; then {@code firstSeq}..{@code lastSeq}) or they were lost with a
   * connection (reported by a bind: then both seqs are 0, or a gap the client saw).
   *
   * @param receiver the receiver
   * @param count how many events
   * @param firstSeq the first dropped seq, or 0 when not known
   * @param lastSeq the last dropped seq, or 0 when not known
   */
  record Dropped(long receiver, long count, long firstSeq, long lastSeq) implements Event {}
}
