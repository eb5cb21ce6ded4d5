// The wire codec (docs/PROTOCOL.md) over msgpack-cxx. msgpack-cxx reports
// bad input by throwing; every throw is caught here and turned into an
// Error, so nothing escapes the API (see the README's "Errors").
#include "tickwheel/protocol.hpp"

#include <cstring>

#include <msgpack.hpp>

namespace tickwheel {

namespace detail {
struct Payload {
  msgpack::object_handle h;
  const msgpack::object& result() const { return h.get().via.array.ptr[2]; }
};
}  // namespace detail

namespace {

class Category : public std::error_category {
 public:
  const char* name() const noexcept override { return "tickwheel"; }
  std::string message(int c) const override { return code_name(c); }
};

// Buf adapts a byte vector to msgpack's packer.
struct Buf {
  std::vector<std::uint8_t>& v;
  void write(const char* p, std::size_t n) { v.insert(v.end(), p, p + n); }
};

Error proto_err(const std::string& what) { return Error{make_error_code(errc::protocol_error), what, ""}; }

using Obj = msgpack::object;

bool get_uint(const Obj& o, std::uint64_t& out) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    out = o.via.u64;
    return true;
  }
  if (o.type == msgpack::type::NIL) {
    out = 0;
    return true;
  }
  return false;
}

bool get_bool(const Obj& o, bool& out) {
  if (o.type == msgpack::type::BOOLEAN) {
    out = o.via.boolean;
    return true;
  }
  if (o.type == msgpack::type::NIL) {
    out = false;
    return true;
  }
  return false;
}

bool get_str(const Obj& o, std::string& out) {
  if (o.type == msgpack::type::STR) {
    out.assign(o.via.str.ptr, o.via.str.size);
    return true;
  }
  if (o.type == msgpack::type::BIN) {
    out.assign(o.via.bin.ptr, o.via.bin.size);
    return true;
  }
  if (o.type == msgpack::type::NIL) {
    out.clear();
    return true;
  }
  return false;
}

bool get_data(const Obj& o, std::vector<std::uint8_t>& out) {
  std::string s;
  if (!get_str(o, s)) return false;
  out.assign(s.begin(), s.end());
  return true;
}

// elems returns o's array elements, or nullptr when o is no array (an
// empty array's elements are a non-null pointer to nothing).
const Obj* elems(const Obj& o, std::size_t& n) {
  static const Obj none;
  if (o.type != msgpack::type::ARRAY) return nullptr;
  n = o.via.array.size;
  return n ? o.via.array.ptr : &none;
}

bool decode_timer(const Obj& o, Timer& t) {
  std::size_t n = 0;
  const Obj* a = elems(o, n);
  if (!a || n < 9) return false;
  std::uint64_t missed = 0;
  bool ok = get_uint(a[0], t.receiver) && get_uint(a[1], t.tid) && get_uint(a[2], t.due) &&
            get_uint(a[3], t.remaining) && get_uint(a[4], t.every) && get_uint(a[5], t.fired) &&
            get_uint(a[6], t.repeat) && get_bool(a[7], t.paused) && get_data(a[8], t.data);
  if (ok && n >= 12) ok = get_str(a[9], t.schedule) && get_str(a[10], t.zone) && get_uint(a[11], missed);
  if (ok && n >= 13) ok = get_uint(a[12], t.group);
  t.missed = static_cast<Missed>(missed);
  return ok;
}

bool decode_push(std::uint64_t kind, const Obj* a, std::size_t n, Event& e) {
  e.kind = static_cast<EventKind>(kind);
  if (kind == 2) {
    if (n < 8) return false;
    bool ok = get_uint(a[1], e.receiver) && get_uint(a[2], e.tid) && get_uint(a[3], e.tick) &&
              get_uint(a[4], e.fired) && get_uint(a[5], e.repeat) && get_bool(a[6], e.last) &&
              get_data(a[7], e.data);
    if (ok && n > 8) ok = get_uint(a[8], e.seq);
    if (ok && n > 9) ok = get_uint(a[9], e.late);
    return ok;
  }
  if (kind == 3) return n >= 3 && get_uint(a[1], e.receiver) && get_uint(a[2], e.session);
  if (n < 4 || !get_uint(a[1], e.receiver) || !get_uint(a[2], e.first_seq) || !get_uint(a[3], e.last_seq)) {
    return false;
  }
  e.count = e.last_seq >= e.first_seq ? e.last_seq - e.first_seq + 1 : 0;
  return true;
}

// result returns an ok message's result array, or nullptr.
const Obj* result_of(const Message& m, std::size_t& n) {
  if (m.kind != Message::ok || !m.payload) return nullptr;
  return elems(m.payload->result(), n);
}

}  // namespace

const std::error_category& category() noexcept {
  static const Category c;
  return c;
}

std::string code_name(int code) {
  static const char* const names[] = {"",         "malformed",        "unknown_op", "unauthorized",
                                      "hello_required", "not_found", "exists",     "invalid_argument",
                                      "limit_exceeded", "bad_state", "unsupported_version", "internal",
                                      "timeout",  "unavailable",      "not_leader"};
  if (code >= 1 && code <= 14) return names[code];
  switch (static_cast<errc>(code)) {
    case errc::request_id_reused: return "request_id_reused";
    case errc::disconnected: return "disconnected";
    case errc::closed: return "closed";
    case errc::request_timeout: return "request_timeout";
    case errc::protocol_error: return "protocol_error";
    case errc::connect_failed: return "connect_failed";
    case errc::bad_argument: return "bad_argument";
    case errc::tls_failed: return "tls_failed";
    default: return "code " + std::to_string(code);
  }
}

void encode_request(const Request& r, std::vector<std::uint8_t>& out) {
  const std::size_t start = out.size();
  out.resize(start + 4);
  Buf buf{out};
  msgpack::packer<Buf> pk(buf);
  auto str = [&](const std::string& s) {
    pk.pack_str(static_cast<std::uint32_t>(s.size()));
    pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
  };
  auto boolean = [&](bool b) { b ? pk.pack_true() : pk.pack_false(); };
  auto head = [&](std::size_t nargs) {
    pk.pack_array(static_cast<std::uint32_t>(2 + nargs));
    pk.pack_uint64(static_cast<std::uint64_t>(r.op));
    pk.pack_uint64(r.id);
  };
  switch (r.op) {
    case Op::hello: head(3); pk.pack_uint64(r.version); str(r.name); str(r.token); break;
    case Op::bind: head(3); pk.pack_uint64(r.receiver); boolean(r.ephemeral); boolean(r.ack); break;
    case Op::unbind: head(1); pk.pack_uint64(r.receiver); break;
    case Op::cancel_all:
      head(r.client ? 2 : 1);
      pk.pack_uint64(r.receiver);
      if (r.client) pk.pack_uint64(r.client);
      break;
    case Op::cancel_group:
      head(r.client ? 2 : 1);
      pk.pack_uint64(r.group);
      if (r.client) pk.pack_uint64(r.client);
      break;
    case Op::pause_all: case Op::resume_all:
      head(r.client ? 3 : 2);
      pk.pack_uint64(r.receiver);
      pk.pack_uint64(r.group);
      if (r.client) pk.pack_uint64(r.client);
      break;
    case Op::list_group:
      head(4);
      for (std::uint64_t v : {r.group, r.from_receiver, r.from_tid, r.limit}) pk.pack_uint64(v);
      break;
    case Op::add: {
      // after_ns, schedule, zone, missed, group, client: only up to the last one set.
      std::size_t later = r.client ? 6 : r.group ? 5 : r.missed ? 4 : !r.zone.empty() ? 3 : !r.schedule.empty() ? 2
                          : r.after_ns ? 1 : 0;
      head(8 + later);
      for (std::uint64_t v : {r.receiver, r.tid, r.after, r.at, r.every, r.repeat}) pk.pack_uint64(v);
      if (r.data.empty()) {
        pk.pack_nil();
      } else {
        pk.pack_bin(static_cast<std::uint32_t>(r.data.size()));
        pk.pack_bin_body(reinterpret_cast<const char*>(r.data.data()), static_cast<std::uint32_t>(r.data.size()));
      }
      boolean(r.replace);
      if (later >= 1) pk.pack_uint64(r.after_ns);
      if (later >= 2) str(r.schedule);
      if (later >= 3) str(r.zone);
      if (later >= 4) pk.pack_uint64(r.missed);
      if (later >= 5) pk.pack_uint64(r.group);
      if (later >= 6) pk.pack_uint64(r.client);
      break;
    }
    case Op::get: head(2); pk.pack_uint64(r.receiver); pk.pack_uint64(r.tid); break;
    case Op::cancel: case Op::pause: case Op::resume:
      head(r.client ? 3 : 2);
      pk.pack_uint64(r.receiver);
      pk.pack_uint64(r.tid);
      if (r.client) pk.pack_uint64(r.client);
      break;
    case Op::list: head(3); pk.pack_uint64(r.receiver); pk.pack_uint64(r.from_tid); pk.pack_uint64(r.limit); break;
    case Op::ack: head(2); pk.pack_uint64(r.receiver); pk.pack_uint64(r.seq); break;
    case Op::fast_forward: head(1); pk.pack_uint64(r.ticks); break;
    case Op::set_speed: {
      // Always a float64 (msgpack-cxx packs an integral double as an int).
      head(1);
      std::uint64_t bits = 0;
      static_assert(sizeof bits == sizeof r.speed, "double is 64 bits");
      std::memcpy(&bits, &r.speed, sizeof bits);
      out.push_back(0xcb);
      for (int s = 56; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(bits >> s));
      break;
    }
    case Op::cluster: head(3); str(r.command); str(r.node); str(r.addr); break;
    default: head(0); break;  // ping, freeze, resume_sync, stats
  }
  const std::uint32_t len = static_cast<std::uint32_t>(out.size() - start - 4);
  out[start] = static_cast<std::uint8_t>(len >> 24);
  out[start + 1] = static_cast<std::uint8_t>(len >> 16);
  out[start + 2] = static_cast<std::uint8_t>(len >> 8);
  out[start + 3] = static_cast<std::uint8_t>(len);
}

bool FrameReader::next(std::vector<std::uint8_t>& payload) {
  if (buf_.size() - off_ < 4) return false;
  const std::uint8_t* h = buf_.data() + off_;
  const std::uint32_t len = (std::uint32_t(h[0]) << 24) | (std::uint32_t(h[1]) << 16) | (std::uint32_t(h[2]) << 8) | h[3];
  if (len == 0) {
    bad_ = true;
    return false;
  }
  if (buf_.size() - off_ - 4 < len) return false;
  payload.assign(h + 4, h + 4 + len);
  off_ += 4 + len;
  if (off_ == buf_.size()) {
    buf_.clear();
    off_ = 0;
  } else if (off_ > 65536 && off_ * 2 > buf_.size()) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(off_));
    off_ = 0;
  }
  return true;
}

Result<Message> decode_message(const std::uint8_t* p, std::size_t n) {
  auto payload = std::make_shared<detail::Payload>();
  try {
    std::size_t off = 0;
    payload->h = msgpack::unpack(reinterpret_cast<const char*>(p), n, off);
    if (off != n) return proto_err("trailing bytes after the message");
  } catch (const std::exception& e) {
    return proto_err(std::string("undecodable message: ") + e.what());
  }
  std::size_t len = 0;
  const Obj* a = elems(payload->h.get(), len);
  std::uint64_t kind = 0;
  if (!a || len < 1 || !get_uint(a[0], kind)) return proto_err("message is not an array with a kind");
  Message m;
  m.kind_code = kind;
  switch (kind) {
    case 0:
      if (len < 3 || !get_uint(a[1], m.id)) return proto_err("bad ok reply");
      m.kind = Message::ok;
      m.payload = payload;
      return m;
    case 1: {
      std::uint64_t code = 0;
      if (len < 4 || !get_uint(a[1], m.id) || !get_uint(a[2], code) || !get_str(a[3], m.err.message)) {
        return proto_err("bad error reply");
      }
      m.kind = Message::error;
      m.err.code = std::error_code(static_cast<int>(code), category());
      if (code == 14 && len >= 5 && !get_str(a[4], m.err.leader)) return proto_err("bad not_leader leader");
      return m;
    }
    case 2: case 3: case 4:
      if (!decode_push(kind, a, len, m.event)) return proto_err("bad push of kind " + std::to_string(kind));
      m.kind = Message::push;
      return m;
    default:
      m.kind = Message::unknown;
      return m;
  }
}

Result<HelloInfo> decode_hello(const Message& m) {
  std::size_t n = 0;
  const Obj* a = result_of(m, n);
  HelloInfo h;
  if (!a || n < 5 || !get_uint(a[0], h.session) || !get_uint(a[1], h.now) || !get_uint(a[2], h.tick_ns) ||
      !get_str(a[3], h.server_version) || a[4].type != msgpack::type::MAP) {
    return proto_err("bad hello result");
  }
  const auto& mp = a[4].via.map;
  for (std::uint32_t i = 0; i < mp.size; i++) {
    std::string k;
    std::uint64_t v = 0;
    if (get_str(mp.ptr[i].key, k) && get_uint(mp.ptr[i].val, v)) h.limits[k] = v;
  }
  return h;
}

Result<BindResult> decode_bind(const Message& m) {
  auto u = decode_uints(m, 3);
  if (!u) return u.error();
  return BindResult{u.value()[0], u.value()[1], u.value()[2]};
}

Result<std::vector<std::uint64_t>> decode_uints(const Message& m, std::size_t want) {
  std::size_t n = 0;
  const Obj* a = result_of(m, n);
  if (!a) return proto_err("bad result");
  std::vector<std::uint64_t> out(want, 0);
  for (std::size_t i = 0; i < want && i < n; i++) {
    if (!get_uint(a[i], out[i])) return proto_err("result element " + std::to_string(i) + " is not a uint");
  }
  return out;
}

Result<Timer> decode_get(const Message& m) {
  std::size_t n = 0;
  const Obj* a = result_of(m, n);
  Timer t;
  if (!a || n < 1 || !decode_timer(a[0], t)) return proto_err("bad get result");
  return t;
}

Result<ListPage> decode_list(const Message& m) {
  std::size_t n = 0, nt = 0;
  const Obj* a = result_of(m, n);
  const Obj* ts = a && n >= 1 ? elems(a[0], nt) : nullptr;
  ListPage p;
  if (!ts) return proto_err("bad list result");
  for (std::size_t i = 0; i < nt; i++) {
    Timer t;
    if (!decode_timer(ts[i], t)) return proto_err("bad timer in list result");
    p.timers.push_back(std::move(t));
  }
  if (n >= 2 && !get_uint(a[1], p.next)) return proto_err("bad list next");
  return p;
}

Result<GroupPage> decode_list_group(const Message& m) {
  std::size_t n = 0, nt = 0;
  const Obj* a = result_of(m, n);
  const Obj* ts = a && n >= 3 ? elems(a[0], nt) : nullptr;
  GroupPage p;
  if (!ts) return proto_err("bad list_group result");
  for (std::size_t i = 0; i < nt; i++) {
    Timer t;
    if (!decode_timer(ts[i], t)) return proto_err("bad timer in list_group result");
    p.timers.push_back(std::move(t));
  }
  if (!get_uint(a[1], p.next.receiver) || !get_uint(a[2], p.next.tid)) return proto_err("bad list_group next");
  return p;
}

Result<Stats> decode_stats(const Message& m) {
  std::size_t n = 0;
  const Obj* a = result_of(m, n);
  if (!a || n < 1 || a[0].type != msgpack::type::MAP) return proto_err("bad stats result");
  Stats s;
  const auto& mp = a[0].via.map;
  for (std::uint32_t i = 0; i < mp.size; i++) {
    std::string k;
    if (!get_str(mp.ptr[i].key, k)) continue;
    const Obj& v = mp.ptr[i].val;
    switch (v.type) {
      case msgpack::type::POSITIVE_INTEGER: s.uints[k] = v.via.u64; break;
      case msgpack::type::BOOLEAN: s.bools[k] = v.via.boolean; break;
      case msgpack::type::FLOAT32: case msgpack::type::FLOAT64: s.floats[k] = v.via.f64; break;
      case msgpack::type::STR: s.strings[k].assign(v.via.str.ptr, v.via.str.size); break;
      default: break;
    }
  }
  return s;
}

Result<ClusterInfo> decode_cluster(const Message& m) {
  std::size_t n = 0;
  const Obj* a = result_of(m, n);
  if (!a || n < 1 || a[0].type != msgpack::type::MAP) return proto_err("bad cluster result");
  ClusterInfo c;
  const auto& mp = a[0].via.map;
  for (std::uint32_t i = 0; i < mp.size; i++) {
    std::string k;
    if (!get_str(mp.ptr[i].key, k)) continue;
    const Obj& v = mp.ptr[i].val;
    bool ok = true;
    if (k == "role") ok = get_str(v, c.role);
    else if (k == "leader") ok = get_str(v, c.leader);
    else if (k == "term") ok = get_uint(v, c.term);
    else if (k == "commit_index") ok = get_uint(v, c.commit_index);
    else if (k == "applied_index") ok = get_uint(v, c.applied_index);
    else if (k == "members") {
      std::size_t nm = 0;
      const Obj* ms = elems(v, nm);
      ok = ms != nullptr;
      for (std::size_t j = 0; ok && j < nm; j++) {
        if (ms[j].type != msgpack::type::MAP) return proto_err("bad cluster member");
        ClusterMember cm;
        for (std::uint32_t q = 0; q < ms[j].via.map.size; q++) {
          std::string mk;
          const auto& kv = ms[j].via.map.ptr[q];
          if (!get_str(kv.key, mk)) continue;
          if (mk == "id") ok = ok && get_str(kv.val, cm.id);
          else if (mk == "raft_addr") ok = ok && get_str(kv.val, cm.raft_addr);
          else if (mk == "voter") ok = ok && get_bool(kv.val, cm.voter);
        }
        c.members.push_back(cm);
      }
    }
    if (!ok) return proto_err("bad cluster field " + k);
  }
  return c;
}

}  // namespace tickwheel
