package io.tickwheel.client;

import java.util.Map;

/**
 * HelloInfo is the server's reply to hello on the current connection.
 *
 * @param session this connection's session id
 * @param now tw-time at the hello
 * @param tickNs the tick length in nanoseconds
 * @param serverVersion the server's version string
 * @param limits the server's limits by wire name (a missing key: off or unknown)
 */
public record HelloInfo(long session, long now, long tickNs, String serverVersion, Map<String, Long> limits) {}
