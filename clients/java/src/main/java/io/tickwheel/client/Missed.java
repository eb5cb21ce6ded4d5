package io.tickwheel.client;

/** Missed is a timer's policy for firings that fall in a server downtime (add's {@code missed}). */
public enum Missed {
  /** Deliver every missed firing, each late (the default; wire 0). */
  ALL,
  /** Deliver the first missed firing, then go on on schedule (wire 1). */
  ONCE,
  /** Deliver none of them (wire 2). */
  SKIP;

  /** The wire value. */
  int wire() {
    return ordinal();
  }

  static Missed of(long wire) {
    return wire >= 0 && wire < 3 ? values()[(int) wire] : ALL;
  }
}
