// Client: the I/O thread, reply matching, reconnects and event delivery.
// Ownership: everything in Impl below `mu` is guarded by it; the socket is
// read and written by the I/O thread only; handlers of replies run on the
// I/O thread without the lock held.
#include "client_impl.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace tickwheel {

using detail::Clock;

namespace {
std::uint64_t new_client_id() {
  std::random_device rd;
  std::uint64_t id = 0;
  while (id == 0) id = (std::uint64_t(rd()) << 32) ^ rd();
  return id;
}

// is_change: the ops that take a request id (PROTOCOL.md "Retrying changes").
bool is_change(Op op) {
  switch (op) {
    case Op::add: case Op::cancel: case Op::pause: case Op::resume:
    case Op::cancel_all: case Op::pause_all: case Op::resume_all: case Op::cancel_group:
      return true;
    default:
      return false;
  }
}

// is_read: the ops that change nothing, asked again of the leader after
// not_leader (PROTOCOL.md "Clusters", item 4; the Go client's safeToRetry,
// with list_group). cluster's changes leave the same configuration when
// repeated.
bool is_read(Op op) {
  return op == Op::get || op == Op::list || op == Op::list_group || op == Op::ping || op == Op::stats ||
         op == Op::cluster;
}

bool dedups(const HelloInfo& h) {
  auto it = h.limits.find("request_id_ticks");
  return it != h.limits.end() && it->second > 0;
}
}  // namespace

Client::Impl::Impl(Options o) : opt(std::move(o)), client_id(new_client_id()) {
  addrs = detail::split_addresses(opt.addresses);
}

Client::Impl::~Impl() { conn.close(); }

void Client::Impl::wake() { waker.signal(); }

void Client::Impl::submit(Request r, Handler h) {
  std::unique_lock<std::mutex> lk(mu);
  if (closing || dead) {
    lk.unlock();
    h(Error{make_error_code(errc::closed), "client closed", ""});
    return;
  }
  r.id = next_id++;
  // A change carries a request id when the server remembers them: it may
  // then be sent again, with the same id, and is applied at most once.
  if (is_change(r.op) && dedups(hello)) r.client = client_id;
  Pending p{r.id, std::move(h), {}, opt.request_timeout.count() > 0, false, std::nullopt, false, false};
  if (p.has_deadline) p.deadline = Clock::now() + opt.request_timeout;
  if (r.client || is_read(r.op)) {
    p.retry = r;
    p.change = r.client != 0;
  }
  if (!connected) {
    waiting.push_back({std::move(r), std::move(p)});
    return;
  }
  const bool was_empty = out.empty();
  encode_request(r, out);
  inflight.push_back(std::move(p));
  if (was_empty && batching == 0) wake();
}

void Client::Impl::queue_item(Item it) {
  {
    std::lock_guard<std::mutex> lk(mu);
    items.push_back(std::move(it));
  }
  cv.notify_all();
}

void Client::Impl::push_event(Event e) { queue_item(Item{std::move(e), nullptr}); }

// on_fire applies the seq rules to a fire event: a duplicate in
// acknowledged mode is removed, a gap in plain mode is reported as dropped.
void Client::Impl::on_fire(Event& e) {
  std::unique_lock<std::mutex> lk(mu);
  auto it = receivers.find(e.receiver);
  if (it != receivers.end()) {
    Recv& rs = it->second;
    if (rs.opts.ack && e.seq != 0 && e.seq <= rs.max_delivered) {
      redelivered_n++;
      return;
    }
    if (!rs.opts.ack && e.seq > rs.expect && rs.expect != 0 && e.seq != 1) {
      Event d;
      d.kind = EventKind::dropped;
      d.receiver = e.receiver;
      d.first_seq = rs.expect;
      d.last_seq = e.seq - 1;
      d.count = e.seq - rs.expect;
      dropped_n += d.count;
      items.push_back(Item{std::move(d), nullptr});
    }
    if (e.seq != 0) rs.expect = e.seq + 1;
    rs.max_delivered = std::max(rs.max_delivered, e.seq);
  }
  items.push_back(Item{std::move(e), nullptr});
  lk.unlock();
  cv.notify_all();
}

void Client::Impl::on_push(Event& e) {
  if (e.kind == EventKind::fire) return on_fire(e);
  {
    std::lock_guard<std::mutex> lk(mu);
    if (e.kind == EventKind::takeover) {
      receivers.erase(e.receiver);  // bound elsewhere now: not re-bound here
    } else if (e.kind == EventKind::dropped) {
      dropped_n += e.count;
      auto it = receivers.find(e.receiver);
      if (it != receivers.end()) it->second.expect = e.last_seq + 1;
    }
    items.push_back(Item{std::move(e), nullptr});
  }
  cv.notify_all();
}

// on_bound records a successful bind (the user's or a re-bind) before any
// event that follows its reply is read.
void Client::Impl::on_bound(std::uint64_t receiver, const BindOptions& o, const BindResult& b) {
  std::unique_lock<std::mutex> lk(mu);
  auto [it, fresh] = receivers.try_emplace(receiver);
  Recv& rs = it->second;
  if (fresh || !o.ack || !rs.opts.ack) rs.max_delivered = 0;  // a new seq history
  rs.opts = o;
  rs.expect = b.first_seq;
  if (b.dropped > 0) {
    dropped_n += b.dropped;
    Event d;
    d.kind = EventKind::dropped;
    d.receiver = receiver;
    d.count = b.dropped;
    items.push_back(Item{std::move(d), nullptr});
    lk.unlock();
    cv.notify_all();
  }
}

void Client::Impl::handle(Result<Message> m) {
  if (!m) return lose("unreadable message: " + m.error().message);
  Message& msg = m.value();
  if (msg.kind == Message::push) return on_push(msg.event);
  if (msg.kind == Message::unknown) return;  // kinds of newer servers
  std::unique_lock<std::mutex> lk(mu);
  if (inflight.empty()) {
    lk.unlock();
    return lose("a reply with no request in flight");
  }
  Pending p = std::move(inflight.front());
  inflight.pop_front();
  if (p.id != msg.id && msg.id != 0) {
    lk.unlock();
    p.done(Error{make_error_code(errc::protocol_error), "reply id does not match the request", ""});
    return lose("reply out of order");
  }
  if (msg.kind == Message::error && msg.err.code == errc::not_leader) {
    leader_hint = msg.err.leader;
    stepped_down = true;
    if (requeue(p, true)) return;  // nothing was changed: asked again of the leader
  }
  lk.unlock();
  if (!p.finished) p.done(std::move(msg));
}

// lose ends the current connection: calls in flight fail with
// disconnected; the loop then reconnects (or, with reconnect off, stops).
void Client::Impl::lose(const std::string& why) {
  std::deque<Pending> failed;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!connected) return;
    connected = false;
    conn.close();
    out.clear();
    reader = FrameReader();
    addr.clear();
    if (!opt.reconnect) dead = true;
    for (auto& p : inflight) {
      if (!requeue(p, stepped_down)) failed.push_back(std::move(p));
    }
    inflight.clear();
    stepped_down = false;
  }
  for (auto& p : failed) {
    if (!p.finished) p.done(Error{make_error_code(errc::disconnected), "connection lost: " + why, ""});
  }
  Event e;
  e.kind = EventKind::disconnected;
  e.detail = why;
  push_event(std::move(e));
  if (dead) fail_waiting(errc::disconnected, "connection lost: " + why);
}

bool Client::Impl::requeue(Pending& p, bool not_leader) {
  if (!p.retry || p.finished || !opt.reconnect || closing) return false;
  if (!p.change && !not_leader) return false;  // a read lost with its connection: the caller decides
  Request r = *p.retry;
  p.sent = true;
  waiting.push_back({std::move(r), std::move(p)});
  return true;
}

// expire_waiting fails the calls waiting for a connection whose deadline
// (Options::request_timeout) ran out.
void Client::Impl::expire_waiting() {
  std::vector<Handler> late;
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lk(mu);
    auto keep = std::stable_partition(waiting.begin(), waiting.end(), [&](const auto& w) {
      return !w.second.has_deadline || w.second.deadline > now;
    });
    for (auto it = keep; it != waiting.end(); ++it) late.push_back(std::move(it->second.done));
    waiting.erase(keep, waiting.end());
  }
  for (auto& h : late) h(Error{make_error_code(errc::request_timeout), "no reply within request_timeout", ""});
}

void Client::Impl::fail_waiting(errc code, const std::string& why) {
  std::vector<std::pair<Request, Pending>> w;
  std::deque<Pending> f;
  {
    std::lock_guard<std::mutex> lk(mu);
    w.swap(waiting);
    f.swap(inflight);
  }
  for (auto& p : f) {
    if (!p.finished) p.done(Error{make_error_code(code), why, ""});
  }
  for (auto& [r, p] : w) p.done(Error{make_error_code(code), why, ""});
}

// adopt makes a dialed connection current: re-binds first, then the calls
// that waited for a connection, in the order they were made.
void Client::Impl::adopt(detail::Dialed d, bool again) {
  std::vector<std::pair<std::uint64_t, BindOptions>> binds;
  {
    std::lock_guard<std::mutex> lk(mu);
    conn = std::move(d.conn);
    addr = d.addr;
    hello = d.hello;
    connected = true;
    last_write = Clock::now();
    for (auto& [r, rs] : receivers) binds.emplace_back(r, rs.opts);
  }
  for (auto& [r, o] : binds) {
    Request req;
    req.op = Op::bind;
    req.receiver = r;
    req.ephemeral = o.ephemeral;
    req.ack = o.ack;
    BindOptions bo = o;
    std::uint64_t rcv = r;
    submit(req, [this, rcv, bo](Result<Message> m) {
      if (!m || m.value().kind != Message::ok) return;  // a failed re-bind: the receiver's events stop
      auto b = decode_bind(m.value());
      if (b) on_bound(rcv, bo, b.value());
    });
  }
  std::vector<Handler> unsafe;  // changes sent before, to a server that would not deduplicate them
  {
    std::lock_guard<std::mutex> lk(mu);
    const bool ids = dedups(hello);
    for (auto& [r, p] : waiting) {
      if (p.sent && p.change && !ids) {
        unsafe.push_back(std::move(p.done));
        continue;
      }
      encode_request(r, out);
      inflight.push_back(std::move(p));
    }
    waiting.clear();
    if (again) reconnects_n++;
  }
  for (auto& h : unsafe) {
    h(Error{make_error_code(errc::disconnected),
            "connection lost: the change may have been applied, and " + d.addr + " does not deduplicate a retry", ""});
  }
  wake();
  if (again) {
    Event e;
    e.kind = EventKind::reconnected;
    e.detail = d.addr;
    push_event(std::move(e));
  }
}

void Client::Impl::reconnect() {
  auto backoff = opt.reconnect_min;
  while (true) {
    std::string first;
    {
      std::unique_lock<std::mutex> lk(mu);
      if (closing || dead) return;
      first = leader_hint;
      leader_hint.clear();
    }
    expire_waiting();
    auto d = detail::dial(addrs, first, opt, tls.get());
    if (d) return adopt(std::move(d.value()), true);
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_for(lk, backoff, [this] { return closing; });
    backoff = std::min(opt.reconnect_max, backoff * 2);
  }
}

int Client::Impl::poll_timeout() {
  auto now = Clock::now();
  auto next = now + std::chrono::milliseconds(250);
  std::lock_guard<std::mutex> lk(mu);
  for (auto& p : inflight) {
    if (p.has_deadline && !p.finished) next = std::min(next, p.deadline);
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return ms < 0 ? 0 : static_cast<int>(ms) + 1;
}

// expire completes calls whose deadline ran out (their replies, when they
// come, are skipped) and pings a connection that has been quiet for a third
// of the server's idle timeout.
void Client::Impl::expire() {
  std::vector<Handler> late;
  auto now = Clock::now();
  bool ping = false;
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& p : inflight) {
      if (p.has_deadline && !p.finished && p.deadline <= now) {
        p.finished = true;
        late.push_back(std::move(p.done));
      }
    }
    auto idle = hello.limits.find("idle_timeout_ms");
    if (idle != hello.limits.end() && idle->second > 0 &&
        now - last_write > std::chrono::milliseconds(idle->second / 3) && out.empty()) {
      ping = true;
      last_write = now;
    }
  }
  for (auto& h : late) h(Error{make_error_code(errc::request_timeout), "no reply within request_timeout", ""});
  if (ping) {
    Request r;
    r.op = Op::ping;
    submit(r, [](Result<Message>) {});
  }
}

void Client::Impl::run() {
  std::vector<std::uint8_t> payload;
  std::vector<std::uint8_t> buf(64 * 1024);
  while (true) {
    bool want_read, want_write;
    detail::socket_t sock;
    short rev, wev;
    bool buffered;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (closing || dead) return;
      sock = connected ? conn.fd() : detail::kNoSocket;
      want_read = items.size() < opt.event_buffer;  // backpressure: a full queue stops reading
      want_write = !out.empty() && batching == 0;
      rev = conn.read_events();
      wev = conn.write_events();
      buffered = conn.buffered();
    }
    if (sock == detail::kNoSocket) {
      reconnect();
      continue;
    }
    pollfd pf[2] = {{sock, static_cast<short>((want_read ? rev : 0) | (want_write ? wev : 0)), 0},
                    {waker.read_end(), POLLIN, 0}};
    // Bytes TLS holds already decrypted are not the socket's: do not wait for them.
    int n = detail::poll_sockets(pf, 2, want_read && buffered ? 0 : poll_timeout());
    if (n < 0) {
      std::error_code ec = detail::last_error();
      if (!detail::would_block(ec)) return lose("poll: " + ec.message());
    }
    if (pf[1].revents & POLLIN) waker.drain();
    const short re = pf[0].revents;
    if ((want_read && ((re & rev) || buffered)) || (re & (POLLHUP | POLLERR))) {
      ssize_t got = conn.read(buf.data(), buf.size());
      if (got == 0 || got == detail::Conn::kError) {
        lose(got == 0 ? "closed by the server" : conn.error());
        continue;
      }
      if (got > 0) {
        reader.feed(buf.data(), static_cast<std::size_t>(got));
        while (reader.next(payload)) {
          handle(decode_message(payload.data(), payload.size()));
          std::lock_guard<std::mutex> lk(mu);
          if (!connected) break;
        }
        if (reader.bad()) lose("bad frame from the server");
      }
    }
    if (want_write && (re & (wev | POLLERR))) {
      std::string err;
      {
        std::lock_guard<std::mutex> lk(mu);
        if (connected && !out.empty()) {
          ssize_t w = conn.write(out.data(), out.size());
          if (w > 0) {
            out.erase(out.begin(), out.begin() + w);
            last_write = Clock::now();
          } else if (w == detail::Conn::kError) {
            err = conn.error();
          }
        }
      }
      if (!err.empty()) lose(err);  // a read reports most of these first
    }
    expire();
  }
}

}  // namespace tickwheel
