package io.tickwheel.client;

/**
 * EventListener receives a client's events ({@link Event.Fire}, {@link Event.Takeover},
 * {@link Event.Dropped}) one at a time, in order, on the client's single event thread.
 * In {@link AckMode#AUTO} a fire event counts as handled once onEvent returns. An
 * exception it throws is logged and the event counts as handled.
 */
@FunctionalInterface
public interface EventListener {
  /**
   * onEvent handles one event.
   *
   * @param e the event
   */
  void onEvent(Event e);
}
