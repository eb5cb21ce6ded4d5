package io.tickwheel.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * ClientOptions configure a {@link TickwheelClient}: the addresses (one server, or a
 * cluster's nodes: the client follows not_leader to the leader), name, token, TLS, the
 * event listener, timeouts, reconnect backoff and the event buffer that bounds memory
 * against a slow listener. A fluent, mutable builder.
 */
public final class ClientOptions {
  final List<String> addresses = new ArrayList<>();
  String name = "java";
  String token = "";
  TlsConfig tls;
  EventListener listener;
  Duration requestTimeout = Duration.ofSeconds(30);
  Duration connectTimeout = Duration.ofSeconds(5);
  boolean reconnect = true;
  Duration reconnectMin = Duration.ofMillis(100);
  Duration reconnectMax = Duration.ofSeconds(5);
  int eventBuffer = 4096;
  int maxFrame = 64 << 20;

  /**
   * Makes options for the given addresses.
   *
   * @param addresses "host:port" each, or one comma-separated list ("a:7420,b:7420")
   */
  public ClientOptions(String... addresses) {
    for (String a : addresses) {
      for (String s : a.split(",")) if (!s.isBlank()) this.addresses.add(s.trim());
    }
    if (this.addresses.isEmpty()) throw new IllegalArgumentException("tickwheel: no address");
  }

  /**
   * @param n the name in the server's logs and stats
   * @return this
   */
  public ClientOptions name(String n) {
    name = n;
    return this;
  }

  /**
   * @param t the admin or client token ("" for none)
   * @return this
   */
  public ClientOptions token(String t) {
    token = t == null ? "" : t;
    return this;
  }

  /**
   * @param t TLS settings, or null for plain TCP
   * @return this
   */
  public ClientOptions tls(TlsConfig t) {
    tls = t;
    return this;
  }

  /**
   * @param l receives every event, in order, on the client's event thread; a slow one
   *     holds the connection's reading back (backpressure), it never loses events
   * @return this
   */
  public ClientOptions listener(EventListener l) {
    listener = l;
    return this;
  }

  /**
   * @param d how long a call waits for its reply (null or zero: forever)
   * @return this
   */
  public ClientOptions requestTimeout(Duration d) {
    requestTimeout = d;
    return this;
  }

  /**
   * @param d how long one TCP connect (and TLS handshake) may take
   * @return this
   */
  public ClientOptions connectTimeout(Duration d) {
    connectTimeout = d;
    return this;
  }

  /**
   * @param on whether to reconnect (and re-bind) after the connection drops
   * @return this
   */
  public ClientOptions reconnect(boolean on) {
    reconnect = on;
    return this;
  }

  /**
   * @param min first backoff
   * @param max largest backoff
   * @return this
   */
  public ClientOptions reconnectBackoff(Duration min, Duration max) {
    reconnectMin = min;
    reconnectMax = max;
    return this;
  }

  /**
   * @param n events held for the listener before the client stops reading the socket
   * @return this
   */
  public ClientOptions eventBuffer(int n) {
    if (n < 1) throw new IllegalArgumentException("tickwheel: eventBuffer " + n);
    eventBuffer = n;
    return this;
  }
}
