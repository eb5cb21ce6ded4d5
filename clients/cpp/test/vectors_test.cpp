// The protocol test vectors (protocol/testdata/vectors.json and
// vectors-edge.json, made from the Go encoders): this client's encoder must
// make every request's bytes, its decoder read every server message to its
// meaning, and the real server must refuse every malformed frame as stated.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "testkit.hpp"
#include "tickwheel/protocol.hpp"

using json = nlohmann::json;
using namespace tickwheel;

namespace {

json load(const std::string& name) {
  std::ifstream f(std::string(TICKWHEEL_REPO) + "/protocol/testdata/" + name);
  return json::parse(f);
}

std::vector<std::uint8_t> unhex(const std::string& s) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

std::string hex(const std::vector<std::uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (auto c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

// j renders a uint as the vectors do: a number up to 2^53-1, else a decimal string.
json j(std::uint64_t v) { return v <= 9007199254740991ULL ? json(v) : json(std::to_string(v)); }
std::uint64_t u(const json& v) { return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<std::uint64_t>(); }
json jdata(const std::vector<std::uint8_t>& d) { return d.empty() ? json(nullptr) : json(hex(d)); }

const std::map<std::string, Op> kOps = {
    {"hello", Op::hello}, {"bind", Op::bind}, {"unbind", Op::unbind}, {"add", Op::add}, {"cancel", Op::cancel},
    {"get", Op::get}, {"list", Op::list}, {"cancel_all", Op::cancel_all}, {"pause", Op::pause},
    {"resume", Op::resume}, {"ping", Op::ping}, {"ack", Op::ack}, {"fast_forward", Op::fast_forward},
    {"freeze", Op::freeze}, {"resume_sync", Op::resume_sync}, {"set_speed", Op::set_speed},
    {"stats", Op::stats}, {"cluster", Op::cluster}, {"pause_all", Op::pause_all},
    {"resume_all", Op::resume_all}, {"list_group", Op::list_group}, {"cancel_group", Op::cancel_group}};

Request request_of(const json& m) {
  Request r;
  r.op = kOps.at(m["op"].get<std::string>());
  r.id = u(m["id"]);
  for (auto& [k, v] : m["args"].items()) {
    if (k == "name") r.name = v;
    else if (k == "token") r.token = v;
    else if (k == "schedule") r.schedule = v;
    else if (k == "zone") r.zone = v;
    else if (k == "command") r.command = v;
    else if (k == "node") r.node = v;
    else if (k == "addr") r.addr = v;
    else if (k == "data") r.data = v.is_null() ? std::vector<std::uint8_t>{} : unhex(v);
    else if (k == "replace") r.replace = v;
    else if (k == "ephemeral") r.ephemeral = v;
    else if (k == "ack") r.ack = v;
    else if (k == "speed") r.speed = v.get<double>();
    else {
      std::map<std::string, std::uint64_t*> f = {
          {"version", &r.version}, {"receiver", &r.receiver}, {"tid", &r.tid}, {"after", &r.after},
          {"at", &r.at}, {"every", &r.every}, {"repeat", &r.repeat}, {"after_ns", &r.after_ns},
          {"missed", &r.missed}, {"from_tid", &r.from_tid}, {"limit", &r.limit}, {"seq", &r.seq},
          {"ticks", &r.ticks}, {"group", &r.group}, {"client", &r.client}, {"from_receiver", &r.from_receiver}};
      EXPECT_TRUE(f.count(k)) << "unknown arg " << k;
      if (f.count(k)) *f[k] = u(v);
    }
  }
  return r;
}

json timer_json(const Timer& t) {
  return {{"receiver", j(t.receiver)}, {"tid", j(t.tid)},     {"due", j(t.due)},
          {"remaining", j(t.remaining)}, {"every", j(t.every)}, {"fired", j(t.fired)},
          {"repeat", j(t.repeat)},     {"paused", t.paused},  {"data", jdata(t.data)},
          {"schedule", t.schedule},    {"zone", t.zone},      {"missed", j(static_cast<std::uint64_t>(t.missed))},
          {"group", j(t.group)}};
}

json uints(const Message& m, std::vector<std::string> names) {
  auto r = decode_uints(m, names.size());
  EXPECT_TRUE(r.ok()) << r.error().message;
  json o = json::object();
  for (std::size_t i = 0; i < names.size(); i++) o[names[i]] = j(r.value()[i]);
  return o;
}

json result_json(const std::string& op, const Message& m) {
  if (op == "hello") {
    auto h = decode_hello(m);
    EXPECT_TRUE(h.ok()) << h.error().message;
    json lim = json::object();
    for (auto& [k, v] : h.value().limits) lim[k] = j(v);
    return {{"session", j(h.value().session)}, {"now", j(h.value().now)}, {"tick_ns", j(h.value().tick_ns)},
            {"server_version", h.value().server_version}, {"limits", lim}};
  }
  if (op == "get") {
    auto t = decode_get(m);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return {{"timer", timer_json(t.value())}};
  }
  if (op == "list") {
    auto p = decode_list(m);
    EXPECT_TRUE(p.ok()) << p.error().message;
    json ts = json::array();
    for (auto& t : p.value().timers) ts.push_back(timer_json(t));
    return {{"timers", ts}, {"next", j(p.value().next)}};
  }
  if (op == "list_group") {
    auto p = decode_list_group(m);
    EXPECT_TRUE(p.ok()) << p.error().message;
    json ts = json::array();
    for (auto& t : p.value().timers) ts.push_back(timer_json(t));
    return {{"timers", ts}, {"next_receiver", j(p.value().next.receiver)}, {"next_tid", j(p.value().next.tid)}};
  }
  if (op == "stats") {
    auto s = decode_stats(m);
    EXPECT_TRUE(s.ok()) << s.error().message;
    json o = json::object();
    for (auto& [k, v] : s.value().uints) o[k] = j(v);
    for (auto& [k, v] : s.value().bools) o[k] = v;
    for (auto& [k, v] : s.value().floats) o[k] = v;
    for (auto& [k, v] : s.value().strings) o[k] = v;
    return {{"stats", o}};
  }
  if (op == "cluster") {
    auto c = decode_cluster(m);
    EXPECT_TRUE(c.ok()) << c.error().message;
    json ms = json::array();
    for (auto& x : c.value().members) ms.push_back({{"id", x.id}, {"raft_addr", x.raft_addr}, {"voter", x.voter}});
    const auto& v = c.value();
    return {{"cluster", {{"role", v.role}, {"leader", v.leader}, {"term", j(v.term)}, {"commit_index", j(v.commit_index)},
                         {"applied_index", j(v.applied_index)}, {"members", ms}}}};
  }
  static const std::map<std::string, std::vector<std::string>> u = {
      {"bind", {"delivered", "dropped", "first_seq"}}, {"unbind", {}}, {"add", {"due"}}, {"cancel", {}},
      {"cancel_all", {"count"}}, {"pause_all", {"count"}}, {"resume_all", {"count"}}, {"cancel_group", {"count"}},
      {"pause", {}}, {"resume", {}}, {"ping", {"now"}}, {"ack", {}},
      {"fast_forward", {"now", "fired"}}, {"freeze", {"now"}}, {"resume_sync", {"now"}}, {"set_speed", {"now"}}};
  return uints(m, u.at(op));
}

json message_json(const Message& m) {
  switch (m.kind) {
    case Message::error: {
      json o = {{"kind", "error"}, {"id", j(m.id)}, {"code", m.err.code.value()},
                {"code_name", code_name(m.err.code.value())}, {"message", m.err.message}};
      if (m.err.code == errc::not_leader) o["leader"] = m.err.leader;
      return o;
    }
    case Message::push: {
      const Event& e = m.event;
      if (e.kind == EventKind::fire) {
        return {{"kind", "fire"}, {"receiver", j(e.receiver)}, {"tid", j(e.tid)}, {"tick", j(e.tick)},
                {"fired", j(e.fired)}, {"repeat", j(e.repeat)}, {"last", e.last}, {"data", jdata(e.data)},
                {"seq", j(e.seq)}, {"late", j(e.late)}};
      }
      if (e.kind == EventKind::takeover) return {{"kind", "takeover"}, {"receiver", j(e.receiver)}, {"session", j(e.session)}};
      return {{"kind", "dropped"}, {"receiver", j(e.receiver)}, {"first_seq", j(e.first_seq)}, {"last_seq", j(e.last_seq)}};
    }
    case Message::unknown:
      return {{"kind", "unknown"}, {"kind_code", m.kind_code}};
    default:
      return {{"kind", "ok"}};
  }
}

Message decode_hex(const std::string& h) {
  auto b = unhex(h);
  FrameReader fr;
  fr.feed(b.data(), b.size());
  std::vector<std::uint8_t> payload;
  EXPECT_TRUE(fr.next(payload)) << "not one whole frame";
  auto m = decode_message(payload.data(), payload.size());
  EXPECT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE(fr.next(payload)) << "bytes after the frame";
  return m.ok() ? m.value() : Message{};
}

void check_file(const std::string& name) {
  json f = load(name);
  int n = 0;
  for (auto& v : f["requests"]) {
    std::vector<std::uint8_t> out;
    encode_request(request_of(v["meaning"]), out);
    EXPECT_EQ(hex(out), v["hex"].get<std::string>()) << name << ": request " << v["name"];
    n++;
  }
  for (auto& v : f["replies"]) {
    Message m = decode_hex(v["hex"]);
    const json& want = v["meaning"];
    ASSERT_EQ(m.kind, Message::ok) << v["name"];
    EXPECT_EQ(j(m.id), want["id"]) << v["name"];
    EXPECT_EQ(result_json(want["op"], m), want["result"]) << name << ": reply " << v["name"];
    n++;
  }
  for (const char* part : {"events", "errors", "accept"}) {
    for (auto& v : f[part]) {
      Message m = decode_hex(v["hex"]);
      json want = v["meaning"];
      if (want["kind"] == "ok") {
        EXPECT_EQ(result_json(want["op"], m), want["result"]) << name << ": " << part << " " << v["name"];
      } else {
        EXPECT_EQ(message_json(m), want) << name << ": " << part << " " << v["name"];
      }
      n++;
    }
  }
  EXPECT_GT(n, 40);
}

}  // namespace

TEST(Vectors, EncodeAndDecodeEveryVector) { check_file("vectors.json"); }
TEST(Vectors, EncodeAndDecodeEveryEdgeVector) { check_file("vectors-edge.json"); }

// raw_frame reads one frame from fd within ms: its payload, or nothing on
// EOF/timeout. fr keeps the bytes of later frames read along with it.
static bool raw_frame(int fd, FrameReader& fr, std::vector<std::uint8_t>& payload, bool& eof, int ms = 3000) {
  eof = false;
  if (fr.next(payload)) return true;
  std::uint8_t buf[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return false;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      eof = true;
      return false;
    }
    fr.feed(buf, static_cast<std::size_t>(n));
    if (fr.next(payload)) return true;
  }
}

TEST(Vectors, ServerRefusesEveryMalformedVector) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  for (const char* file : {"vectors.json", "vectors-edge.json"}) {
    const json f = load(file);  // kept: a range-for over load(file)["malformed"] would outlive the temporary
    for (auto& v : f["malformed"]) {
      auto colon = srv->addr().rfind(':');
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(static_cast<uint16_t>(std::stoi(srv->addr().substr(colon + 1))));
      inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
      Request h;
      h.op = Op::hello;
      h.id = 1;
      h.version = 1;
      h.name = "vectors";
      std::vector<std::uint8_t> out;
      encode_request(h, out);
      auto bad = unhex(v["hex"]);
      out.insert(out.end(), bad.begin(), bad.end());
      ASSERT_EQ(send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
      std::vector<std::uint8_t> payload;
      FrameReader fr;
      bool eof = false;
      ASSERT_TRUE(raw_frame(fd, fr, payload, eof)) << "no hello reply";
      ASSERT_TRUE(raw_frame(fd, fr, payload, eof)) << v["name"] << ": no error reply";
      auto m = decode_message(payload.data(), payload.size());
      ASSERT_TRUE(m.ok()) << v["name"];
      const json& want = v["expect"];
      EXPECT_EQ(m.value().kind, Message::error) << v["name"];
      EXPECT_EQ(code_name(m.value().err.code.value()), want["code"].get<std::string>()) << v["name"];
      EXPECT_EQ(j(m.value().id), want["id"]) << v["name"];
      bool closed = !raw_frame(fd, fr, payload, eof, want["closes"].get<bool>() ? 3000 : 300) && eof;
      EXPECT_EQ(closed, want["closes"].get<bool>()) << v["name"];
      close(fd);
    }
  }
}

// A change whose request id (client, id) the server remembers from another
// request gets request_id_reused (17), read as errc::request_id_reused;
// the same request sent again gets its first reply, byte for byte.
TEST(Vectors, ServerRequestIdReusedIsATypedError) {
  // A single server remembers request ids only when told to.
  auto srv = testkit::Server::start({"-frozen", "-start-tick", "1000", "-max-request-ids", "100000"});
  ASSERT_TRUE(srv);
  auto colon = srv->addr().rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(srv->addr().substr(colon + 1))));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  std::vector<std::uint8_t> out;
  Request h;
  h.op = Op::hello;
  h.id = 1;
  h.version = 1;
  h.name = "request-ids";
  encode_request(h, out);
  Request add;
  add.op = Op::add;
  add.id = 5;
  add.client = 6840227782638526189ULL;
  add.receiver = 42;
  add.tid = 7;
  add.after = 30;
  encode_request(add, out);
  encode_request(add, out);  // a retry: the same reply again
  Request other = add;
  other.op = Op::cancel;  // another change under the same (client, id)
  encode_request(other, out);
  ASSERT_EQ(send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
  FrameReader fr;
  std::vector<std::uint8_t> payload, first;
  bool eof = false;
  ASSERT_TRUE(raw_frame(fd, fr, payload, eof)) << "no hello reply";
  auto hello = decode_message(payload.data(), payload.size());
  ASSERT_TRUE(hello.ok());
  ASSERT_TRUE(decode_hello(hello.value()).value().limits.count("request_id_ticks")) << "server without request ids";
  ASSERT_TRUE(raw_frame(fd, fr, first, eof));
  ASSERT_TRUE(raw_frame(fd, fr, payload, eof));
  EXPECT_EQ(payload, first);
  auto due = decode_uints(decode_message(first.data(), first.size()).value(), 1);
  ASSERT_TRUE(due.ok());
  EXPECT_EQ(due.value()[0], 1030u);
  ASSERT_TRUE(raw_frame(fd, fr, payload, eof));
  auto m = decode_message(payload.data(), payload.size());
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m.value().kind, Message::error);
  EXPECT_EQ(m.value().id, 5u);
  EXPECT_EQ(m.value().err.code, errc::request_id_reused);
  EXPECT_EQ(m.value().err.code.message(), "request_id_reused");
  close(fd);
}
