package io.tickwheel.client;

/** AckMode says how a receiver's events are acknowledged. */
public enum AckMode {
  /** Plain mode: events are not kept by the server until acknowledged. */
  NONE,
  /** Acknowledged mode; the client acks each event once the listener has returned from it. */
  AUTO,
  /** Acknowledged mode; the application calls {@link TickwheelClient#ack(long, long)}. */
  MANUAL
}
