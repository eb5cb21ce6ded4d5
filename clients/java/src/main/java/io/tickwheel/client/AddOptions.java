package io.tickwheel.client;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * AddOptions are the optional parts of an add: {@code every}, {@code repeat}, {@code data},
 * {@code replace}, {@code missed}, {@code group}. A fluent, mutable builder: make one per call
 * ({@code AddOptions.repeat(4).every(3).data("poison")}). Without {@code repeat} a timer
 * fires once; {@link #forever()} repeats it until cancelled.
 */
public final class AddOptions {
  long every;
  long repeat = 1;
  byte[] data;
  boolean replace;
  Missed missed = Missed.ALL;
  long group;

  /** Makes the defaults: fire once, no data, no replace. */
  public AddOptions() {}

  /** @return new defaults */
  public static AddOptions defaults() {
    return new AddOptions();
  }

  /**
   * @param n total firings, 1 to 2^32-1
   * @return new options firing n times
   */
  public static AddOptions repeat(long n) {
    return new AddOptions().times(n);
  }

  /**
   * times sets the total number of firings.
   *
   * @param n 1 to 2^32-1 (use {@link #forever()} for no end)
   * @return this
   */
  public AddOptions times(long n) {
    if (n < 1 || n > 0xffffffffL) throw new IllegalArgumentException("tickwheel: repeat " + n + ": want 1..2^32-1 or forever()");
    repeat = n;
    return this;
  }

  /** @return new options repeating until cancelled */
  public static AddOptions forever() {
    AddOptions o = new AddOptions();
    o.repeat = 0;
    return o;
  }

  /** @return this, repeating until cancelled */
  public AddOptions repeatForever() {
    repeat = 0;
    return this;
  }

  /**
   * every sets the ticks between firings after the first (0: the first delay).
   *
   * @param ticks the interval
   * @return this
   */
  public AddOptions every(long ticks) {
    every = ticks;
    return this;
  }

  /**
   * data sets the bytes every fire event of the timer carries.
   *
   * @param d the data (at most the server's max_data bytes)
   * @return this
   */
  public AddOptions data(byte[] d) {
    data = d;
    return this;
  }

  /**
   * data sets the data as UTF-8.
   *
   * @param s the data
   * @return this
   */
  public AddOptions data(String s) {
    return data(s.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * replace replaces an existing timer with the same tid (else the add fails with Exists).
   *
   * @return this
   */
  public AddOptions replace() {
    replace = true;
    return this;
  }

  /**
   * missed sets the policy for firings that fall in a server downtime.
   *
   * @param m the policy
   * @return this
   */
  public AddOptions missed(Missed m) {
    missed = m;
    return this;
  }

  /**
   * group puts the timer in a group (a uint64 the caller picks, whatever the receivers), which
   * the group calls act on: {@link TickwheelClient#pauseGroup}, {@link TickwheelClient#resumeGroup},
   * {@link TickwheelClient#cancelGroup}, {@link TickwheelClient#listGroup}. A server that
   * predates groups ignores it.
   *
   * @param g the group; 0 (the default) is none
   * @return this
   */
  public AddOptions group(long g) {
    group = g;
    return this;
  }

  /** args puts these options' wire arguments into a. */
  void into(Map<String, Object> a) {
    a.put("group", group);
    a.put("every", every);
    a.put("repeat", repeat);
    a.put("data", data);
    a.put("replace", replace);
    a.put("missed", (long) missed.wire());
  }

  static Map<String, Object> base(long receiver, long tid) {
    Map<String, Object> a = new HashMap<>();
    a.put("receiver", receiver);
    a.put("tid", tid);
    return a;
  }
}
