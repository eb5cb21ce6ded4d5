package io.tickwheel.client;

/**
 * TickwheelException is an error reply from the server (a nested subclass per error code
 * of docs/PROTOCOL.md, so callers catch what they handle: {@link NotFound}, {@link Exists},
 * ...), or one of the client's own failures ({@link Disconnected}, {@link Closed},
 * {@link ConnectFailed}), whose {@link #code()} is 0. Futures complete exceptionally with
 * it; {@code join()} wraps it in a CompletionException whose cause it is.
 */
public class TickwheelException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** Error code of not_leader: the node is a cluster follower. */
  public static final int NOT_LEADER = 14;
  /** Error code of request_id_reused: a request id reused for a different change. */
  public static final int REQUEST_ID_REUSED = 17;

  private final int code;
  private final String op;
  private final String serverMessage;

  /**
   * Makes an exception for an error reply.
   *
   * @param op the request's op name
   * @param code the error code (0 for the client's own failures)
   * @param serverMessage the server's message
   * @param cause the cause, or null
   */
  protected TickwheelException(String op, int code, String serverMessage, Throwable cause) {
    super("tickwheel: " + op + ": " + (code == 0 ? "" : codeName(code) + ": ") + serverMessage, cause);
    this.code = code;
    this.op = op;
    this.serverMessage = serverMessage;
  }

  /** @return the protocol's error code, 0 for the client's own failures */
  public int code() {
    return code;
  }

  /** @return the protocol's name of the code ("not_found"), or "code(N)" for an unknown one */
  public String codeName() {
    return codeName(code);
  }

  /** @return the op of the request it answers */
  public String op() {
    return op;
  }

  /** @return the server's message (for humans; it may change between versions) */
  public String serverMessage() {
    return serverMessage;
  }

  /**
   * codeName names a code as the protocol does.
   *
   * @param code an error code
   * @return its name, or "code(N)"
   */
  public static String codeName(int code) {
    return switch (code) {
      case 0 -> "client";
      case 1 -> "malformed"; case 2 -> "unknown_op"; case 3 -> "unauthorized";
      case 4 -> "hello_required"; case 5 -> "not_found"; case 6 -> "exists";
      case 7 -> "invalid_argument"; case 8 -> "limit_exceeded"; case 9 -> "bad_state";
      case 10 -> "unsupported_version"; case 11 -> "internal"; case 12 -> "timeout";
      case 13 -> "unavailable"; case 14 -> "not_leader"; case 17 -> "request_id_reused";
      default -> "code(" + code + ")";
    };
  }

  /** of makes the exception of an error reply's code; an unknown code is a plain TickwheelException. */
  static TickwheelException of(String op, int code, String message, String leader) {
    return switch (code) {
      case 1 -> new Malformed(op, message);
      case 2 -> new UnknownOp(op, message);
      case 3 -> new Unauthorized(op, message);
      case 4 -> new HelloRequired(op, message);
      case 5 -> new NotFound(op, message);
      case 6 -> new Exists(op, message);
      case 7 -> new InvalidArgument(op, message);
      case 8 -> new LimitExceeded(op, message);
      case 9 -> new BadState(op, message);
      case 10 -> new UnsupportedVersion(op, message);
      case 11 -> new Internal(op, message);
      case 12 -> new Timeout(op, message);
      case 13 -> new Unavailable(op, message);
      case 14 -> new NotLeader(op, message, leader);
      case 17 -> new RequestIdReused(op, message);
      default -> new TickwheelException(op, code, message, null);
    };
  }

  /** Code 1: the server could not read a request; it closed the connection. */
  public static final class Malformed extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Malformed(String op, String m) { super(op, 1, m, null); }
  }

  /** Code 2: an op the server does not know. */
  public static final class UnknownOp extends TickwheelException {
    private static final long serialVersionUID = 1L;
    UnknownOp(String op, String m) { super(op, 2, m, null); }
  }

  /** Code 3: an admin op without the admin token, a bad token, or a receiver not bound here under add_only_bound. */
  public static final class Unauthorized extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Unauthorized(String op, String m) { super(op, 3, m, null); }
  }

  /** Code 4: a request before hello. */
  public static final class HelloRequired extends TickwheelException {
    private static final long serialVersionUID = 1L;
    HelloRequired(String op, String m) { super(op, 4, m, null); }
  }

  /** Code 5: no such timer, or a receiver not bound here. */
  public static final class NotFound extends TickwheelException {
    private static final long serialVersionUID = 1L;
    NotFound(String op, String m) { super(op, 5, m, null); }
  }

  /** Code 6: add of an existing timer without replace. */
  public static final class Exists extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Exists(String op, String m) { super(op, 6, m, null); }
  }

  /** Code 7: an argument the server refuses (overflow, a bad schedule, an ack past what was sent, ...). */
  public static final class InvalidArgument extends TickwheelException {
    private static final long serialVersionUID = 1L;
    InvalidArgument(String op, String m) { super(op, 7, m, null); }
  }

  /** Code 8: a limit was reached; the message names it. */
  public static final class LimitExceeded extends TickwheelException {
    private static final long serialVersionUID = 1L;
    LimitExceeded(String op, String m) { super(op, 8, m, null); }
  }

  /** Code 9: pause of a paused timer, resume of a running one, cluster on a single server. */
  public static final class BadState extends TickwheelException {
    private static final long serialVersionUID = 1L;
    BadState(String op, String m) { super(op, 9, m, null); }
  }

  /** Code 10: the server does not speak this client's wire version. */
  public static final class UnsupportedVersion extends TickwheelException {
    private static final long serialVersionUID = 1L;
    UnsupportedVersion(String op, String m) { super(op, 10, m, null); }
  }

  /** Code 11: a server bug. */
  public static final class Internal extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Internal(String op, String m) { super(op, 11, m, null); }
  }

  /** Code 12: a connection timeout of the server ran out; it closed the connection. */
  public static final class Timeout extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Timeout(String op, String m) { super(op, 12, m, null); }
  }

  /** Code 13: the server cannot make the change durable now (a full disk): nothing changed, retry later. */
  public static final class Unavailable extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Unavailable(String op, String m) { super(op, 13, m, null); }
  }

  /** Code 14: the node is not the cluster's leader; {@link #leader()} names the leader's address, or "". */
  public static final class NotLeader extends TickwheelException {
    private static final long serialVersionUID = 1L;
    private final String leader;

    NotLeader(String op, String m, String leader) {
      super(op, 14, m + " (leader " + (leader.isEmpty() ? "unknown" : leader) + ")", null);
      this.leader = leader;
    }

    /** @return the leader's client address, "" when the node knows none */
    public String leader() {
      return leader;
    }
  }

  /**
   * Code 17: a change carried a request id (client, id) that the server remembers from a
   * different request of the same client; nothing changed. A client bug: each change a
   * client sends gets an id of its own (docs/PROTOCOL.md "Retrying changes").
   */
  public static final class RequestIdReused extends TickwheelException {
    private static final long serialVersionUID = 1L;
    RequestIdReused(String op, String m) { super(op, 17, m, null); }
  }

  /** The connection dropped before the reply came: the request may or may not have been applied. */
  public static final class Disconnected extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Disconnected(String op, Throwable cause) {
      super(op, 0, "the connection dropped before the reply" + (cause == null ? "" : ": " + cause.getMessage()), cause);
    }
  }

  /** The client was closed. */
  public static final class Closed extends TickwheelException {
    private static final long serialVersionUID = 1L;
    Closed(String op) { super(op, 0, "the client is closed", null); }
  }

  /** No address of the client's list could be connected to. */
  public static final class ConnectFailed extends TickwheelException {
    private static final long serialVersionUID = 1L;
    ConnectFailed(String msg, Throwable cause) { super("connect", 0, msg, cause); }
  }
}
