package io.tickwheel.client;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.msgpack.value.Value;

/**
 * Calls is how a client's operations reach the server: one request on the ready connection
 * of its {@link Link} (waiting for one), with the request timeout, asked again where that is
 * safe (docs/PROTOCOL.md "Retrying changes"): a read answered not_leader, and a change on a
 * server that remembers request ids, with the same client and request id on every attempt.
 * Stateless but for the client's id; safe from any thread. Owned by its
 * {@link TickwheelClient}.
 */
final class Calls {
  private static final System.Logger LOG = System.getLogger("io.tickwheel.client");
  private static final Set<Integer> SAFE_TO_RETRY = Set.of(Protocol.GET, Protocol.LIST, Protocol.PING,
      Protocol.STATS, Protocol.CLUSTER, Protocol.LIST_GROUP);
  /** The changes: sent with a request id, and again after not_leader or a lost connection, on a server that remembers request ids. */
  private static final Set<Integer> CHANGES = Set.of(Protocol.ADD, Protocol.CANCEL, Protocol.CANCEL_ALL,
      Protocol.PAUSE, Protocol.RESUME, Protocol.PAUSE_ALL, Protocol.RESUME_ALL, Protocol.CANCEL_GROUP);

  private final ClientOptions o;
  private final Link link;
  /** This client's id for request ids: random, non-zero, the same across reconnections. */
  private final long clientId = newClientId();

  Calls(ClientOptions o, Link link) {
    this.o = o;
    this.link = link;
  }

  private static long newClientId() {
    java.security.SecureRandom r = new java.security.SecureRandom();
    for (;;) {
      long id = r.nextLong();
      if (id != 0) return id;
    }
  }

  /**
   * call sends one request on the ready connection (waiting for one), with the request
   * timeout. A read answered not_leader is asked again on the next connection. So is a
   * change (add, cancel, pause, resume, and the bulk cancel_all, pause_all, resume_all,
   * cancel_group), and also after its connection dropped
   * with it in flight, when the server remembers request ids (its hello's request_id_ticks):
   * it then carries this client's id and the same request id on every attempt, and the
   * server applies it at most once, answering a retry of one it applied with the first
   * reply (docs/PROTOCOL.md "Retrying changes"). Elsewhere a change's NotLeader or
   * Disconnected goes to the caller: it may have been applied. onOk (may be null) runs on
   * the I/O thread as the OK reply is read, before later messages.
   */
  CompletableFuture<List<Value>> call(int op, Map<String, ?> args, Consumer<List<Value>> onOk) {
    CompletableFuture<List<Value>> result = new CompletableFuture<>();
    attempt(op, args, onOk, result, CHANGES.contains(op) ? new long[1] : null, null);
    if (o.requestTimeout != null && !o.requestTimeout.isZero()) {
      result.orTimeout(o.requestTimeout.toMillis(), TimeUnit.MILLISECONDS);
    }
    return result;
  }

  /**
   * attempt sends the request once and retries as call says. change is null for a request
   * that is no change, else holds its request id (0 until the first attempt on a server
   * that remembers request ids fixes it); dead is the connection the last attempt failed
   * on, which a retry does not use again.
   */
  private void attempt(int op, Map<String, ?> args, Consumer<List<Value>> onOk,
      CompletableFuture<List<Value>> result, long[] change, Connection dead) {
    Connection ready = link.readyConn(dead);
    if (ready != null) { // the common case: no future to wait for one
      attemptOn(ready, op, args, onOk, result, change);
      return;
    }
    link.waitConn(dead).whenComplete((c, err) -> {
      if (err != null) {
        result.completeExceptionally(err);
      } else {
        attemptOn(c, op, args, onOk, result, change);
      }
    });
  }

  /** attemptOn sends the request on c and, when it fails, retries as call says. */
  private void attemptOn(Connection c, int op, Map<String, ?> args, Consumer<List<Value>> onOk,
      CompletableFuture<List<Value>> result, long[] change) {
    CompletableFuture<List<Value>> sent;
    if (change == null) {
      sent = link.sendOn(c, op, args, onOk);
    } else {
      HelloInfo h = link.hello(); // the hello of c: a new one is said only once c is gone
      boolean dedup = h != null && h.limits().getOrDefault("request_id_ticks", 0L) != 0;
      if (change[0] != 0 && !dedup) {
        result.completeExceptionally(new TickwheelException.Disconnected(Protocol.opName(op),
            new java.io.IOException("the change may have been applied, and " + c.address()
                + " does not deduplicate a retry (no request_id_ticks)")));
        return;
      }
      if (dedup) {
        if (change[0] == 0) change[0] = link.nextId();
        sent = link.sendOn(c, op, change[0], args, clientId, onOk);
      } else {
        sent = link.sendOn(c, op, args, onOk);
      }
    }
    sent.whenComplete((r, e) -> {
      Throwable cause = e instanceof CompletionException ? e.getCause() : e;
      boolean retry = change != null && change[0] != 0
          ? cause instanceof TickwheelException.NotLeader || cause instanceof TickwheelException.Disconnected
          : cause instanceof TickwheelException.NotLeader && SAFE_TO_RETRY.contains(op);
      if (cause == null) {
        result.complete(r);
      } else if (retry && o.reconnect && !result.isDone() && !link.closing()) {
        attempt(op, args, onOk, result, change, c);
      } else {
        result.completeExceptionally(cause);
      }
    });
  }

  /** A decoder of a result. */
  @FunctionalInterface
  interface Dec<T> {
    T apply(List<Value> r) throws Protocol.DecodeException;
  }

  /** map decodes f's result with d; a DecodeException fails the returned future. */
  static <T> CompletableFuture<T> map(CompletableFuture<List<Value>> f, Dec<T> d) {
    return f.thenApply(r -> {
      try {
        return d.apply(r);
      } catch (Protocol.DecodeException e) {
        throw new CompletionException(e);
      }
    });
  }

  /** warn logs a failure of a request no caller waits for (not a lost connection or a close). */
  static <T> T warn(String what, Throwable e) {
    Throwable c = e instanceof CompletionException ? e.getCause() : e;
    if (!(c instanceof TickwheelException.Disconnected) && !(c instanceof TickwheelException.Closed)) {
      LOG.log(System.Logger.Level.WARNING, "tickwheel: " + what + ": " + c);
    }
    return null;
  }
}
