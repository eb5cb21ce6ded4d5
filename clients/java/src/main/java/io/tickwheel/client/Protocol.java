package io.tickwheel.client;

import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.core.buffer.ArrayBufferInput;
import org.msgpack.value.ArrayValue;
import org.msgpack.value.IntegerValue;
import org.msgpack.value.Value;
import org.msgpack.value.ValueType;

/**
 * Protocol is wire version 1 of docs/PROTOCOL.md as pure functions over bytes: requests
 * encoded to whole frames, server messages decoded from frame payloads. It holds no state
 * and does no I/O. Every uint64 of the wire is a Java {@code long} read as unsigned
 * ({@link Long#toUnsignedString(long)} shows it).
 */
final class Protocol {
  private Protocol() {}

  /** The wire version this client speaks. */
  static final int VERSION = 1;
  /** Bytes of a frame's length header. */
  static final int HEADER = 4;

  static final int HELLO = 1, BIND = 2, UNBIND = 3, ADD = 4, CANCEL = 5, GET = 6, LIST = 7,
      CANCEL_ALL = 8, PAUSE = 9, RESUME = 10, PING = 11, ACK = 12, PAUSE_ALL = 13, RESUME_ALL = 14,
      LIST_GROUP = 15, CANCEL_GROUP = 16, FAST_FORWARD = 20,
      FREEZE = 21, RESUME_SYNC = 22, SET_SPEED = 23, STATS = 24, CLUSTER = 25;

  /** The protocol's name of each op, by code (null where none). */
  static String opName(int op) {
    return switch (op) {
      case HELLO -> "hello"; case BIND -> "bind"; case UNBIND -> "unbind"; case ADD -> "add";
      case CANCEL -> "cancel"; case GET -> "get"; case LIST -> "list"; case CANCEL_ALL -> "cancel_all";
      case PAUSE -> "pause"; case RESUME -> "resume"; case PING -> "ping"; case ACK -> "ack";
      case PAUSE_ALL -> "pause_all"; case RESUME_ALL -> "resume_all"; case LIST_GROUP -> "list_group";
      case CANCEL_GROUP -> "cancel_group";
      case FAST_FORWARD -> "fast_forward"; case FREEZE -> "freeze"; case RESUME_SYNC -> "resume_sync";
      case SET_SPEED -> "set_speed"; case STATS -> "stats"; case CLUSTER -> "cluster";
      default -> null;
    };
  }

  /** One argument of a request: its wire name and kind (u uint, s str, d data, b bool, f float). */
  record Arg(String name, char kind) {}

  private static List<Arg> args(String spec) {
    List<Arg> out = new ArrayList<>();
    if (spec.isEmpty()) return out;
    for (String a : spec.split(",")) out.add(new Arg(a.substring(2), a.charAt(0)));
    return out;
  }

  private static final ThreadLocal<MessageBufferPacker> PACKER =
      ThreadLocal.withInitial(() -> MessagePack.newDefaultBufferPacker());

  private static final Map<Integer, List<Arg>> OP_ARGS = new java.util.HashMap<>();

  static {
    for (int op = 1; op <= CLUSTER; op++) if (opName(op) != null) OP_ARGS.put(op, List.copyOf(opArgs(op)));
  }

  /** The arguments of each op, in wire order. */
  static List<Arg> opArgs(int op) {
    return switch (op) {
      case HELLO -> args("u:version,s:name,s:token");
      case BIND -> args("u:receiver,b:ephemeral,b:ack");
      case UNBIND -> args("u:receiver");
      case CANCEL_ALL -> args("u:receiver,u:client");
      case ADD -> args("u:receiver,u:tid,u:after,u:at,u:every,u:repeat,d:data,b:replace,"
          + "u:after_ns,s:schedule,s:zone,u:missed,u:group,u:client");
      case GET -> args("u:receiver,u:tid");
      case CANCEL, PAUSE, RESUME -> args("u:receiver,u:tid,u:client");
      case LIST -> args("u:receiver,u:from_tid,u:limit");
      case PAUSE_ALL, RESUME_ALL -> args("u:receiver,u:group,u:client");
      case LIST_GROUP -> args("u:group,u:from_receiver,u:from_tid,u:limit");
      case CANCEL_GROUP -> args("u:group,u:client");
      case ACK -> args("u:receiver,u:seq");
      case FAST_FORWARD -> args("u:ticks");
      case SET_SPEED -> args("f:speed");
      case CLUSTER -> args("s:command,s:node,s:addr");
      default -> args("");
    };
  }

  /**
   * How many of an op's arguments are always sent, for an op whose later arguments came
   * after version 1 first shipped: those (add's after_ns, schedule, zone, missed, group,
   * client; the client of cancel, pause, resume and the bulk ops) only up to the last one
   * set, so a request that uses none of them has the bytes it always had.
   */
  private static int baseArgs(int op) {
    return switch (op) {
      case ADD -> 8;
      case CANCEL, PAUSE, RESUME, PAUSE_ALL, RESUME_ALL -> 2;
      case CANCEL_ALL, CANCEL_GROUP -> 1;
      default -> Integer.MAX_VALUE;
    };
  }

  private static boolean isDefault(Object v) {
    if (v == null) return true;
    if (v instanceof Long l) return l == 0;
    if (v instanceof Integer i) return i == 0;
    if (v instanceof String s) return s.isEmpty();
    if (v instanceof Boolean b) return !b;
    if (v instanceof byte[] b) return b.length == 0;
    return false;
  }

  /**
   * encode returns the request {@code [op, id, args...]} as one whole frame (header
   * included). {@code args} holds values by wire name (Long or Integer for uints, String,
   * byte[] for data, Boolean, Double); a missing one is its default. Empty data is nil.
   */
  static byte[] encode(int op, long id, Map<String, ?> args) {
    return encode(op, id, args, 0);
  }

  /**
   * encode is encode with the argument {@code client} set to client when it is not 0 (a
   * change's request id: no copy of the caller's map per request).
   */
  static byte[] encode(int op, long id, Map<String, ?> args, long client) {
    List<Arg> spec = OP_ARGS.getOrDefault(op, List.of());
    int n = spec.size();
    int base = baseArgs(op);
    while (n > base && isDefault(value(args, spec.get(n - 1).name(), client))) n--;
    MessageBufferPacker p = PACKER.get(); // per thread, reused: no 8 KiB buffer per request
    p.clear();
    try {
      p.writePayload(NO_HEADER); // the length, once known, goes over it: one copy of the frame
      p.packArrayHeader(2 + n);
      packUint(p, op);
      packUint(p, id);
      for (int i = 0; i < n; i++) {
        Arg a = spec.get(i);
        Object v = value(args, a.name(), client);
        switch (a.kind()) {
          case 'u' -> packUint(p, v == null ? 0 : ((Number) v).longValue());
          case 's' -> p.packString(v == null ? "" : (String) v);
          case 'b' -> p.packBoolean(v != null && (Boolean) v);
          case 'f' -> p.packDouble(v == null ? 0 : ((Number) v).doubleValue());
          case 'd' -> {
            byte[] d = (byte[]) v;
            if (d == null || d.length == 0) {
              p.packNil();
            } else {
              p.packBinaryHeader(d.length);
              p.writePayload(d);
            }
          }
          default -> throw new IllegalStateException("arg kind " + a.kind());
        }
      }
      byte[] frame = p.toByteArray();
      int len = frame.length - HEADER;
      frame[0] = (byte) (len >>> 24);
      frame[1] = (byte) (len >>> 16);
      frame[2] = (byte) (len >>> 8);
      frame[3] = (byte) len;
      return frame;
    } catch (IOException e) {
      throw new IllegalStateException("msgpack: " + e.getMessage(), e); // a buffer packer does no I/O
    }
  }

  private static final byte[] NO_HEADER = new byte[HEADER];

  private static Object value(Map<String, ?> args, String name, long client) {
    return client != 0 && name.equals("client") ? (Object) client : args.get(name);
  }

  /**
   * packUint packs v read as unsigned, in its smallest unsigned encoding (above 2^63-1:
   * uint 64, 0xcf and 8 bytes, written directly: no BigInteger per value).
   */
  private static void packUint(MessageBufferPacker p, long v) throws IOException {
    if (v >= 0) {
      p.packLong(v);
      return;
    }
    byte[] b = UINT64.get();
    b[0] = (byte) 0xcf;
    for (int i = 0; i < 8; i++) b[1 + i] = (byte) (v >>> (56 - 8 * i));
    p.writePayload(b);
  }

  private static final ThreadLocal<byte[]> UINT64 = ThreadLocal.withInitial(() -> new byte[9]);

  // ---- decoding ----

  /** A decoded server message: one of the records below. */
  sealed interface Message permits Ok, Err, Push, Unknown {}

  /** An OK reply: {@code [0, id, result]}. */
  record Ok(long id, List<Value> result) implements Message {}

  /** An error reply: {@code [1, id, code, message, leader?]}; leader is "" unless code is 14. */
  record Err(long id, int code, String message, String leader) implements Message {}

  /** A push: a fire, takeover or dropped notice. */
  record Push(Event event) implements Message {}

  /** A message of a kind this client does not know: ignored. */
  record Unknown(long kind) implements Message {}

  /** DecodeException is a server message this client cannot read. */
  static final class DecodeException extends IOException {
    private static final long serialVersionUID = 1L;

    DecodeException(String msg) {
      super("tickwheel: bad message from the server: " + msg);
    }
  }

  /** An unpacker per thread (the connections' I/O threads), reset onto each payload. */
  private static final class Reader {
    final ArrayBufferInput in = new ArrayBufferInput(new byte[0]);
    final MessageUnpacker u = MessagePack.newDefaultUnpacker(in);
  }

  private static final ThreadLocal<Reader> READER = ThreadLocal.withInitial(Reader::new);

  /** decode reads one frame payload. */
  static Message decode(byte[] payload, int off, int len) throws DecodeException {
    Value v;
    Reader r = READER.get();
    try {
      r.in.reset(payload, off, len);
      r.u.reset(r.in);
      Message fast = decodeFast(r.u);
      if (fast != null) return fast;
      r.in.reset(payload, off, len);
      r.u.reset(r.in);
      v = r.u.unpackValue();
    } catch (IOException | RuntimeException e) {
      throw new DecodeException(e.toString());
    }
    if (!v.isArrayValue() || v.asArrayValue().size() < 1) throw new DecodeException("not an array");
    List<Value> a = v.asArrayValue().list();
    long kind = uint(a.get(0), "kind");
    switch ((int) Math.min(kind, 100)) {
      case 0 -> {
        need(a, 3, "ok reply");
        return new Ok(uint(a.get(1), "id"), array(a.get(2), "result"));
      }
      case 1 -> {
        need(a, 4, "error reply");
        int code = (int) uint(a.get(2), "code");
        String leader = code == TickwheelException.NOT_LEADER && a.size() > 4 ? str(a.get(4), "leader") : "";
        return new Err(uint(a.get(1), "id"), code, str(a.get(3), "message"), leader);
      }
      case 2 -> {
        need(a, 9, "fire event");
        return new Push(new Event.Fire(uint(a.get(1), "receiver"), uint(a.get(2), "tid"),
            uint(a.get(3), "tick"), uint(a.get(4), "fired"), uint(a.get(5), "repeat"),
            bool(a.get(6), "last"), data(a.get(7), "data"), uint(a.get(8), "seq"),
            a.size() > 9 ? uint(a.get(9), "late") : 0));
      }
      case 3 -> {
        need(a, 3, "takeover");
        return new Push(new Event.Takeover(uint(a.get(1), "receiver"), uint(a.get(2), "session")));
      }
      case 4 -> {
        need(a, 4, "dropped notice");
        long first = uint(a.get(2), "first_seq"), last = uint(a.get(3), "last_seq");
        long count = Long.compareUnsigned(last, first) >= 0 ? last - first + 1 : 0;
        return new Push(new Event.Dropped(uint(a.get(1), "receiver"), count, first, last));
      }
      default -> {
        return new Unknown(kind);
      }
    }
  }

  /**
   * decodeFast reads the two messages that come by the thousand, an OK reply and a fire
   * event, field by field (no tree of values for a fire; only the result of a reply), or
   * returns null for anything else or anything unexpected, which {@link #decode} then reads
   * the general way (and reports).
   */
  private static Message decodeFast(MessageUnpacker u) {
    try {
      if (u.getNextFormat() != MessageFormat.FIXARRAY) return null;
      int n = u.unpackArrayHeader();
      if (n < 3 || u.getNextFormat() != MessageFormat.POSFIXINT) return null;
      int kind = u.unpackInt();
      if (kind == 0 && n == 3) {
        long id = nextUint(u);
        if (u.getNextFormat().getValueType() != ValueType.ARRAY) return null;
        return new Ok(id, u.unpackValue().asArrayValue().list());
      }
      if (kind != 2 || n < 9) return null;
      long receiver = nextUint(u), tid = nextUint(u), tick = nextUint(u), fired = nextUint(u), repeat = nextUint(u);
      if (u.getNextFormat().getValueType() != ValueType.BOOLEAN) return null;
      boolean last = u.unpackBoolean();
      byte[] data = null;
      MessageFormat df = u.getNextFormat();
      if (df == MessageFormat.NIL) {
        u.unpackNil();
      } else if (df.getValueType() == ValueType.BINARY) {
        data = u.readPayload(u.unpackBinaryHeader());
      } else {
        return null;
      }
      long seq = nextUint(u);
      long late = n > 9 ? nextUint(u) : 0;
      return new Push(new Event.Fire(receiver, tid, tick, fired, repeat, last,
          data == null || data.length == 0 ? null : data, seq, late));
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /** nextUint reads a non-negative integer of at most 64 bits as an unsigned long, else throws. */
  private static long nextUint(MessageUnpacker u) throws IOException {
    MessageFormat f = u.getNextFormat();
    if (f == MessageFormat.UINT64) return u.unpackBigInteger().longValue(); // the same 64 bits
    if (f.getValueType() != ValueType.INTEGER) throw new IOException("not an integer");
    long v = u.unpackLong();
    if (v < 0) throw new IOException("negative");
    return v;
  }

  private static void need(List<Value> a, int n, String what) throws DecodeException {
    if (a.size() < n) throw new DecodeException(what + " of " + a.size() + " elements, want " + n);
  }

  /** uint reads a msgpack integer >= 0 (nil is 0) as an unsigned long. */
  static long uint(Value v, String what) throws DecodeException {
    if (v.isNilValue()) return 0;
    if (!v.isIntegerValue()) throw new DecodeException(what + ": " + v.getValueType() + ", want a uint");
    IntegerValue i = v.asIntegerValue();
    if (i.isInLongRange()) {
      long l = i.toLong();
      if (l < 0) throw new DecodeException(what + ": negative");
      return l;
    }
    BigInteger b = i.toBigInteger();
    if (b.signum() < 0) throw new DecodeException(what + ": negative");
    return b.longValue(); // above 2^63-1: the same 64 bits, read as unsigned
  }

  static String str(Value v, String what) throws DecodeException {
    if (v.isNilValue()) return "";
    if (v.isStringValue() || v.isBinaryValue()) {
      return new String(v.asRawValue().asByteArray(), StandardCharsets.UTF_8);
    }
    throw new DecodeException(what + ": " + v.getValueType() + ", want a str");
  }

  static boolean bool(Value v, String what) throws DecodeException {
    if (v.isNilValue()) return false;
    if (!v.isBooleanValue()) throw new DecodeException(what + ": " + v.getValueType() + ", want a bool");
    return v.asBooleanValue().getBoolean();
  }

  /** data reads bin, str or nil; empty is null (no data). */
  static byte[] data(Value v, String what) throws DecodeException {
    if (v.isNilValue()) return null;
    if (v.isStringValue() || v.isBinaryValue()) {
      byte[] b = v.asRawValue().asByteArray();
      return b.length == 0 ? null : b;
    }
    throw new DecodeException(what + ": " + v.getValueType() + ", want bin, str or nil");
  }

  static List<Value> array(Value v, String what) throws DecodeException {
    if (v.isNilValue()) return List.of();
    if (!v.isArrayValue()) throw new DecodeException(what + ": " + v.getValueType() + ", want an array");
    return v.asArrayValue().list();
  }

  /** uints reads the first n elements of a result as uints; missing ones are 0. */
  static long[] uints(List<Value> r, int n, String what) throws DecodeException {
    long[] out = new long[n];
    for (int i = 0; i < n && i < r.size(); i++) out[i] = uint(r.get(i), what);
    return out;
  }

  static Timer timer(Value v) throws DecodeException {
    List<Value> t = array(v, "timer");
    need(t, 9, "timer");
    long missed = t.size() > 11 ? uint(t.get(11), "missed") : 0; // 10-13 elements: older servers send fewer
    return new Timer(uint(t.get(0), "receiver"), uint(t.get(1), "tid"), uint(t.get(2), "due"),
        uint(t.get(3), "remaining"), uint(t.get(4), "every"), uint(t.get(5), "fired"),
        uint(t.get(6), "repeat"), bool(t.get(7), "paused"), data(t.get(8), "data"),
        t.size() > 9 ? str(t.get(9), "schedule") : "", t.size() > 10 ? str(t.get(10), "zone") : "",
        Missed.of(missed), t.size() > 12 ? uint(t.get(12), "group") : 0);
  }

  static ListPage listPage(List<Value> r) throws DecodeException {
    List<Timer> ts = new ArrayList<>();
    if (!r.isEmpty()) for (Value v : array(r.get(0), "timers")) ts.add(timer(v));
    long next = r.size() > 1 ? uint(r.get(1), "next") : 0;
    return new ListPage(List.copyOf(ts), next);
  }

  /** groupPage reads a list_group result: {@code [[timer...], next_receiver, next_tid]}. */
  static GroupPage groupPage(List<Value> r) throws DecodeException {
    need(r, 3, "list_group result");
    List<Timer> ts = new ArrayList<>();
    for (Value v : array(r.get(0), "timers")) ts.add(timer(v));
    return new GroupPage(List.copyOf(ts), uint(r.get(1), "next_receiver"), uint(r.get(2), "next_tid"));
  }

  static HelloInfo hello(List<Value> r) throws DecodeException {
    need(r, 5, "hello result");
    Map<String, Long> limits = new LinkedHashMap<>();
    if (!r.get(4).isNilValue()) {
      if (!r.get(4).isMapValue()) throw new DecodeException("hello limits: want a map");
      for (Map.Entry<Value, Value> e : r.get(4).asMapValue().entrySet()) {
        if (e.getValue().isIntegerValue()) limits.put(str(e.getKey(), "limit key"), uint(e.getValue(), "limit"));
      }
    }
    return new HelloInfo(uint(r.get(0), "session"), uint(r.get(1), "now"), uint(r.get(2), "tick_ns"),
        str(r.get(3), "server_version"), Map.copyOf(limits));
  }

  /** plain converts a msgpack value to plain Java: Long (unsigned), Double, Boolean, String, List, Map. */
  static Object plain(Value v) throws DecodeException {
    ValueType t = v.getValueType();
    switch (t) {
      case NIL: return null;
      case BOOLEAN: return v.asBooleanValue().getBoolean();
      case INTEGER: return uint(v, "value");
      case FLOAT: return v.asFloatValue().toDouble();
      case STRING: case BINARY: return str(v, "value");
      case ARRAY: {
        List<Object> out = new ArrayList<>();
        for (Value e : ((ArrayValue) v).list()) out.add(plain(e));
        return out;
      }
      case MAP: {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<Value, Value> e : v.asMapValue().entrySet()) out.put(str(e.getKey(), "key"), plain(e.getValue()));
        return out;
      }
      default: throw new DecodeException("value of type " + t);
    }
  }

  /** statsOf reads stats' (or cluster's) map result. */
  static Map<String, Object> map(List<Value> r, String what) throws DecodeException {
    if (r.isEmpty() || !r.get(0).isMapValue()) throw new DecodeException(what + ": want a map");
    @SuppressWarnings("unchecked")
    Map<String, Object> m = (Map<String, Object>) plain(r.get(0));
    return m;
  }

  /** clusterStatus reads cluster's result: a map of role, leader, term, commit_index, applied_index and members. */
  static ClusterStatus clusterStatus(List<Value> r) throws DecodeException {
    Map<String, Object> m = map(r, "cluster");
    List<ClusterStatus.Member> members = new ArrayList<>();
    Object ms = m.get("members");
    if (ms instanceof List<?> l) {
      for (Object x : l) {
        if (x instanceof Map<?, ?> mm) {
          members.add(new ClusterStatus.Member(String.valueOf(mm.get("id")), String.valueOf(mm.get("raft_addr")),
              Boolean.TRUE.equals(mm.get("voter"))));
        }
      }
    }
    return new ClusterStatus(String.valueOf(m.getOrDefault("role", "")), String.valueOf(m.getOrDefault("leader", "")),
        num(m.get("term")), num(m.get("commit_index")), num(m.get("applied_index")), List.copyOf(members),
        num(m.get("check")));
  }

  private static long num(Object o) {
    return o instanceof Long l ? l : 0;
  }
}
