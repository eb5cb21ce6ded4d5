package io.tickwheel.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.math.BigInteger;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.msgpack.value.Value;

/**
 * The protocol test vectors (protocol/testdata/vectors.json and vectors-edge.json,
 * generated from the Go encoders): the encoder makes every request's bytes, and the
 * decoder reads every server message to its meaning, including the messages of older and
 * newer servers a client must accept.
 */
class VectorsTest {
  private static final HexFormat HEX = HexFormat.of();
  private static final BigInteger MAX_SAFE = BigInteger.valueOf((1L << 53) - 1);

  @SuppressWarnings("unchecked")
  private static Map<String, Object> load(String name) throws Exception {
    return (Map<String, Object>) Json.parse(Files.readString(TestServer.REPO.resolve("protocol/testdata/" + name)));
  }

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> list(Map<String, Object> file, String key) {
    return (List<Map<String, Object>>) file.get(key);
  }

  private static long u64(Object o) {
    if (o instanceof BigInteger b) return b.longValue();
    if (o instanceof String s) return new BigInteger(s).longValue();
    throw new IllegalArgumentException("not a uint: " + o);
  }

  /** j renders a uint as the vectors do: a number up to 2^53-1, else a decimal string. */
  private static Object j(long v) {
    BigInteger b = new BigInteger(Long.toUnsignedString(v));
    return b.compareTo(MAX_SAFE) <= 0 ? b : b.toString();
  }

  private static Object hex(byte[] d) {
    return d == null ? null : HEX.formatHex(d);
  }

  @ParameterizedTest
  @ValueSource(strings = {"vectors.json", "vectors-edge.json"})
  @SuppressWarnings("unchecked")
  void requestsEncodeToTheVectorsBytes(String file) throws Exception {
    Map<String, Object> f = load(file);
    assertEquals(BigInteger.ONE, f.get("protocol"));
    List<Map<String, Object>> reqs = list(f, "requests");
    assertTrue(reqs.size() >= 17, "requests in " + file);
    for (Map<String, Object> v : reqs) {
      Map<String, Object> m = (Map<String, Object>) v.get("meaning");
      int op = ((BigInteger) m.get("op_code")).intValue();
      Map<String, Object> args = new HashMap<>();
      Map<String, Object> given = (Map<String, Object>) m.get("args");
      for (Protocol.Arg a : Protocol.opArgs(op)) {
        if (!given.containsKey(a.name())) continue;
        Object x = given.get(a.name());
        switch (a.kind()) {
          case 'u' -> args.put(a.name(), u64(x));
          case 'd' -> args.put(a.name(), x == null ? null : HEX.parseHex((String) x));
          case 'f' -> args.put(a.name(), ((Number) x).doubleValue());
          default -> args.put(a.name(), x);
        }
      }
      assertEquals(given.size(), args.size(), v.get("name") + ": an argument this client does not know");
      byte[] got = Protocol.encode(op, u64(m.get("id")), args);
      assertEquals(v.get("hex"), HEX.formatHex(got), (String) v.get("name"));
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"vectors.json", "vectors-edge.json"})
  @SuppressWarnings("unchecked")
  void serverMessagesDecodeToTheVectorsMeaning(String file) throws Exception {
    Map<String, Object> f = load(file);
    int n = 0;
    for (String key : List.of("replies", "events", "errors", "accept")) {
      for (Map<String, Object> v : list(f, key)) {
        byte[] frame = HEX.parseHex((String) v.get("hex"));
        int len = (int) (((frame[0] & 0xffL) << 24) | ((frame[1] & 0xff) << 16) | ((frame[2] & 0xff) << 8) | (frame[3] & 0xff));
        assertEquals(frame.length - 4, len, v.get("name") + ": one whole frame");
        Map<String, Object> want = (Map<String, Object>) v.get("meaning");
        Object got = meaning(Protocol.decode(frame, 4, len), (String) want.get("op"));
        assertSame(want, got, (String) v.get("name"));
        n++;
      }
    }
    assertTrue(n >= 15, "messages checked: " + n);
  }

  private static Map<String, Object> meaning(Protocol.Message m, String op) throws Exception {
    Map<String, Object> out = new LinkedHashMap<>();
    if (m instanceof Protocol.Ok ok) {
      out.put("kind", "ok");
      out.put("id", j(ok.id()));
      out.put("op", op);
      out.put("result", result(op, ok.result()));
    } else if (m instanceof Protocol.Err e) {
      out.put("kind", "error");
      out.put("id", j(e.id()));
      out.put("code", BigInteger.valueOf(e.code()));
      out.put("code_name", TickwheelException.codeName(e.code()));
      out.put("message", e.message());
      if (e.code() == TickwheelException.NOT_LEADER) out.put("leader", e.leader());
    } else if (m instanceof Protocol.Push p) {
      Event ev = p.event();
      if (ev instanceof Event.Fire x) {
        out.put("kind", "fire");
        out.put("receiver", j(x.receiver()));
        out.put("tid", j(x.tid()));
        out.put("tick", j(x.tick()));
        out.put("fired", j(x.fired()));
        out.put("repeat", j(x.repeat()));
        out.put("last", x.last());
        out.put("data", hex(x.data()));
        out.put("seq", j(x.seq()));
        out.put("late", j(x.late()));
      } else if (ev instanceof Event.Takeover x) {
        out.put("kind", "takeover");
        out.put("receiver", j(x.receiver()));
        out.put("session", j(x.session()));
      } else if (ev instanceof Event.Dropped x) {
        out.put("kind", "dropped");
        out.put("receiver", j(x.receiver()));
        out.put("first_seq", j(x.firstSeq()));
        out.put("last_seq", j(x.lastSeq()));
      }
    } else if (m instanceof Protocol.Unknown u) {
      out.put("kind", "unknown");
      out.put("kind_code", j(u.kind()));
    }
    return out;
  }

  private static Map<String, Object> timer(Timer t) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("receiver", j(t.receiver()));
    m.put("tid", j(t.tid()));
    m.put("due", j(t.due()));
    m.put("remaining", j(t.remaining()));
    m.put("every", j(t.every()));
    m.put("fired", j(t.fired()));
    m.put("repeat", j(t.repeat()));
    m.put("paused", t.paused());
    m.put("data", hex(t.data()));
    m.put("schedule", t.schedule());
    m.put("zone", t.zone());
    m.put("missed", j(t.missed().ordinal()));
    m.put("group", j(t.group()));
    return m;
  }

  private static final Map<String, List<String>> UINTS = Map.ofEntries(
      Map.entry("bind", List.of("delivered", "dropped", "first_seq")), Map.entry("unbind", List.of()),
      Map.entry("add", List.of("due")), Map.entry("cancel", List.of()), Map.entry("cancel_all", List.of("count")),
      Map.entry("pause", List.of()), Map.entry("resume", List.of()), Map.entry("ping", List.of("now")),
      Map.entry("ack", List.of()), Map.entry("fast_forward", List.of("now", "fired")),
      Map.entry("freeze", List.of("now")), Map.entry("resume_sync", List.of("now")),
      Map.entry("set_speed", List.of("now")), Map.entry("pause_all", List.of("count")),
      Map.entry("resume_all", List.of("count")), Map.entry("cancel_group", List.of("count")));

  private static Map<String, Object> result(String op, List<Value> r) throws Exception {
    Map<String, Object> m = new LinkedHashMap<>();
    switch (op) {
      case "hello" -> {
        HelloInfo h = Protocol.hello(r);
        m.put("session", j(h.session()));
        m.put("now", j(h.now()));
        m.put("tick_ns", j(h.tickNs()));
        m.put("server_version", h.serverVersion());
        Map<String, Object> l = new LinkedHashMap<>();
        h.limits().forEach((k, v) -> l.put(k, j(v)));
        m.put("limits", l);
      }
      case "get" -> m.put("timer", timer(Protocol.timer(r.get(0))));
      case "list" -> {
        ListPage p = Protocol.listPage(r);
        List<Object> ts = new ArrayList<>();
        for (Timer t : p.timers()) ts.add(timer(t));
        m.put("timers", ts);
        m.put("next", j(p.next()));
      }
      case "list_group" -> {
        GroupPage p = Protocol.groupPage(r);
        List<Object> ts = new ArrayList<>();
        for (Timer t : p.timers()) ts.add(timer(t));
        m.put("timers", ts);
        m.put("next_receiver", j(p.nextReceiver()));
        m.put("next_tid", j(p.nextTid()));
      }
      case "stats" -> {
        Map<String, Object> s = new LinkedHashMap<>();
        Protocol.map(r, "stats").forEach((k, v) -> s.put(k, v instanceof Long l ? j(l) : v));
        m.put("stats", s);
      }
      case "cluster" -> {
        ClusterStatus c = Protocol.clusterStatus(r);
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("role", c.role());
        s.put("leader", c.leader());
        s.put("term", j(c.term()));
        s.put("commit_index", j(c.commitIndex()));
        s.put("applied_index", j(c.appliedIndex()));
        List<Object> ms = new ArrayList<>();
        for (ClusterStatus.Member x : c.members()) {
          ms.add(Map.of("id", x.id(), "raft_addr", x.raftAddr(), "voter", x.voter()));
        }
        s.put("members", ms);
        m.put("cluster", s);
      }
      default -> {
        List<String> names = UINTS.get(op);
        if (names == null) fail("no result shape for " + op);
        long[] u = Protocol.uints(r, names.size(), op);
        for (int i = 0; i < names.size(); i++) m.put(names.get(i), j(u[i]));
      }
    }
    return m;
  }

  /** assertSame compares a vector's meaning with a decoded one; numbers compare by value. */
  private static void assertSame(Object want, Object got, String where) {
    if (want instanceof Map<?, ?> w) {
      if (!(got instanceof Map<?, ?> g)) {
        fail(where + ": want a map, got " + got);
        return;
      }
      assertEquals(w.keySet(), g.keySet(), where + ": keys");
      for (Object k : w.keySet()) assertSame(w.get(k), g.get(k), where + "." + k);
    } else if (want instanceof List<?> w) {
      if (!(got instanceof List<?> g)) {
        fail(where + ": want a list, got " + got);
        return;
      }
      assertEquals(w.size(), g.size(), where + ": length");
      for (int i = 0; i < w.size(); i++) assertSame(w.get(i), g.get(i), where + "[" + i + "]");
    } else if (want instanceof Number w && got instanceof Number g) {
      assertEquals(0, new java.math.BigDecimal(w.toString()).compareTo(new java.math.BigDecimal(g.toString())),
          where + ": want " + w + ", got " + g);
    } else {
      assertEquals(want, got, where);
    }
  }
}
