// The public methods of Client: each builds a Request, and decodes its
// reply into the call's Result, delivered to a future and, when given, to a
// Callback that poll() runs.
#include <algorithm>
#include <cmath>

#include "client_impl.hpp"

namespace tickwheel {

namespace {

template <class T, class Decode>
Future<T> call(Client::Impl& im, Request r, Callback<T> cb, Decode decode) {
  auto prom = std::make_shared<std::promise<Result<T>>>();
  Future<T> fut = prom->get_future();
  im.submit(std::move(r), [&im, prom, cb = std::move(cb), decode](Result<Message> m) {
    Result<T> res = !m ? Result<T>(m.error())
                    : m.value().kind == Message::error ? Result<T>(m.value().err)
                                                        : decode(m.value());
    if (cb) im.queue_item(Client::Impl::Item{Event{}, [cb, res] { cb(res); }});
    prom->set_value(std::move(res));
  });
  return fut;
}

// refuse completes a call with a local error, unsent.
template <class T>
Future<T> refuse(Client::Impl& im, Callback<T> cb, errc code, const std::string& why) {
  std::promise<Result<T>> prom;
  Result<T> res(Error{make_error_code(code), why, ""});
  if (cb) im.queue_item(Client::Impl::Item{Event{}, [cb, res] { cb(res); }});
  prom.set_value(std::move(res));
  return prom.get_future();
}

Result<std::uint64_t> first_uint(const Message& m) {
  auto u = decode_uints(m, 1);
  if (!u) return u.error();
  return u.value()[0];
}

Result<Done> done(const Message&) { return Done{}; }

Request req(Op op) {
  Request r;
  r.op = op;
  return r;
}

Request add_req(std::uint64_t receiver, std::uint64_t tid, const AddOptions& o) {
  Request r = req(Op::add);
  r.receiver = receiver;
  r.tid = tid;
  r.repeat = o.repeat;
  r.every = o.every;
  r.data = o.data;
  r.replace = o.replace;
  r.zone = o.zone;
  r.missed = static_cast<std::uint64_t>(o.missed);
  r.group = o.group;
  return r;
}

Request rt(Op op, std::uint64_t receiver, std::uint64_t tid) {
  Request r = req(op);
  r.receiver = receiver;
  r.tid = tid;
  return r;
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Client>> Client::connect(Options opts) noexcept {
  try {
    auto im = std::make_unique<Impl>(std::move(opts));
    if (std::string err; !detail::net_init(err)) return Error{make_error_code(errc::connect_failed), err, ""};
    if (!im->waker.ok()) {
      const std::error_code ec = detail::last_error();
      return Error{make_error_code(errc::connect_failed), "wake channel: " + ec.message(), ""};
    }
    if (im->opt.tls.enabled) {
      auto t = detail::TlsContext::make(im->opt.tls);
      if (!t) return t.error();
      im->tls = std::move(t.value());
    }
    auto d = detail::dial(im->addrs, "", im->opt, im->tls.get());
    if (!d) return d.error();
    im->adopt(std::move(d.value()), false);
    Impl* raw = im.get();
    im->io = std::thread([raw] { raw->run(); });
    return std::unique_ptr<Client>(new Client(std::move(im)));
  } catch (const std::exception& e) {  // std::thread or allocation failure
    return Error{make_error_code(errc::connect_failed), e.what(), ""};
  }
}

Client::~Client() { close(); }

bool Client::tls_available() noexcept { return detail::tls_built(); }

void Client::close() noexcept {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->closing) return;
    impl_->closing = true;
  }
  impl_->cv.notify_all();
  impl_->wake();
  if (impl_->io.joinable()) impl_->io.join();
  impl_->fail_waiting(errc::closed, "client closed");
}

Future<std::uint64_t> Client::add(std::uint64_t receiver, std::uint64_t tid, std::uint64_t after,
                                  const AddOptions& o, Callback<std::uint64_t> cb) noexcept {
  Request r = add_req(receiver, tid, o);
  r.after = after;
  return call<std::uint64_t>(*impl_, std::move(r), std::move(cb), first_uint);
}

Future<std::uint64_t> Client::add_at(std::uint64_t receiver, std::uint64_t tid, std::uint64_t at,
                                     const AddOptions& o, Callback<std::uint64_t> cb) noexcept {
  Request r = add_req(receiver, tid, o);
  r.at = at;
  return call<std::uint64_t>(*impl_, std::move(r), std::move(cb), first_uint);
}

Future<std::uint64_t> Client::add_after(std::uint64_t receiver, std::uint64_t tid, std::chrono::nanoseconds d,
                                        const AddOptions& o, Callback<std::uint64_t> cb) noexcept {
  Request r = add_req(receiver, tid, o);
  const std::uint64_t ns = d.count() > 0 ? static_cast<std::uint64_t>(d.count()) : 0;
  const std::uint64_t tick = hello_info().tick_ns;
  r.after_ns = ns;
  r.after = tick ? (ns + tick - 1) / tick : 0;  // for servers that predate after_ns
  return call<std::uint64_t>(*impl_, std::move(r), std::move(cb), first_uint);
}

Future<std::uint64_t> Client::add_schedule(std::uint64_t receiver, std::uint64_t tid, const std::string& schedule,
                                           const AddOptions& o, Callback<std::uint64_t> cb) noexcept {
  Request r = add_req(receiver, tid, o);
  r.schedule = schedule;
  return call<std::uint64_t>(*impl_, std::move(r), std::move(cb), first_uint);
}

Future<Done> Client::cancel(std::uint64_t receiver, std::uint64_t tid, Callback<Done> cb) noexcept {
  return call<Done>(*impl_, rt(Op::cancel, receiver, tid), std::move(cb), done);
}

Future<Timer> Client::get(std::uint64_t receiver, std::uint64_t tid, Callback<Timer> cb) noexcept {
  return call<Timer>(*impl_, rt(Op::get, receiver, tid), std::move(cb), decode_get);
}

Future<ListPage> Client::list_page(std::uint64_t receiver, std::uint64_t from_tid, std::uint64_t limit,
                                   Callback<ListPage> cb) noexcept {
  Request r = req(Op::list);
  r.receiver = receiver;
  r.from_tid = from_tid;
  r.limit = limit;
  return call<ListPage>(*impl_, std::move(r), std::move(cb), decode_list);
}

namespace {
// ListAll pages through a receiver from the I/O thread: each page's reply
// sends the request for the next.
struct ListAll : std::enable_shared_from_this<ListAll> {
  Client::Impl& im;
  std::uint64_t receiver;
  Callback<std::vector<Timer>> cb;
  std::promise<Result<std::vector<Timer>>> prom;
  std::vector<Timer> acc;
  ListAll(Client::Impl& i, std::uint64_t r, Callback<std::vector<Timer>> c) : im(i), receiver(r), cb(std::move(c)) {}
  void finish(Result<std::vector<Timer>> res) {
    if (cb) im.queue_item(Client::Impl::Item{Event{}, [c = cb, res] { c(res); }});
    prom.set_value(std::move(res));
  }
  void page(std::uint64_t from) {
    Request r;
    r.op = Op::list;
    r.receiver = receiver;
    r.from_tid = from;
    auto self = shared_from_this();
    im.submit(std::move(r), [self](Result<Message> m) {
      if (!m) return self->finish(m.error());
      if (m.value().kind == Message::error) return self->finish(m.value().err);
      auto p = decode_list(m.value());
      if (!p) return self->finish(p.error());
      for (auto& t : p.value().timers) self->acc.push_back(std::move(t));
      if (p.value().next == 0) return self->finish(std::move(self->acc));
      self->page(p.value().next);
    });
  }
};
}  // namespace

Future<std::vector<Timer>> Client::list(std::uint64_t receiver, Callback<std::vector<Timer>> cb) noexcept {
  auto l = std::make_shared<ListAll>(*impl_, receiver, std::move(cb));
  auto fut = l->prom.get_future();
  l->page(0);
  return fut;
}

Future<std::uint64_t> Client::cancel_all(std::uint64_t receiver, Callback<std::uint64_t> cb) noexcept {
  Request r = req(Op::cancel_all);
  r.receiver = receiver;
  return call<std::uint64_t>(*impl_, std::move(r), std::move(cb), first_uint);
}

Future<Done> Client::pause(std::uint64_t receiver, std::uint64_t tid, Callback<Done> cb) noexcept {
  return call<Done>(*impl_, rt(Op::pause, receiver, tid), std::move(cb), done);
}

Future<Done> Client::resume(std::uint64_t receiver, std::uint64_t tid, Callback<Done> cb) noexcept {
  return call<Done>(*impl_, rt(Op::resume, receiver, tid), std::move(cb), done);
}

namespace {
Future<std::uint64_t> bulk(Client::Impl& im, Op op, std::uint64_t receiver, std::uint64_t group, bool by_group,
                           Callback<std::uint64_t> cb) {
  if (by_group && group == 0) {
    return refuse<std::uint64_t>(im, std::move(cb), errc::bad_argument, "group 0 is no group: name one");
  }
  Request r = req(op);
  r.receiver = receiver;
  r.group = group;
  return call<std::uint64_t>(im, std::move(r), std::move(cb), first_uint);
}

// cursor_after reports whether a is past b: a next that does not move on
// would have list_group loop forever.
bool cursor_after(const GroupCursor& a, const GroupCursor& b) {
  return a.receiver != b.receiver ? a.receiver > b.receiver : a.tid > b.tid;
}

// decode_group_page reads a list_group reply and checks that its next moves
// past the cursor and the page's last timer.
Result<GroupPage> decode_group_page(const Message& m, const GroupCursor& from) {
  auto p = decode_list_group(m);
  if (!p) return p;
  const GroupPage& g = p.value();
  if (!g.next.end() && (!cursor_after(g.next, from) ||
                        (!g.timers.empty() && !cursor_after(g.next, {g.timers.back().receiver, g.timers.back().tid})))) {
    return Error{make_error_code(errc::protocol_error), "list_group: next is not past the cursor and the page", ""};
  }
  return p;
}

// GroupAll pages through a group from the I/O thread, as ListAll does.
struct GroupAll : std::enable_shared_from_this<GroupAll> {
  Client::Impl& im;
  std::uint64_t group;
  Callback<std::vector<Timer>> cb;
  std::promise<Result<std::vector<Timer>>> prom;
  std::vector<Timer> acc;
  GroupAll(Client::Impl& i, std::uint64_t g, Callback<std::vector<Timer>> c) : im(i), group(g), cb(std::move(c)) {}
  void finish(Result<std::vector<Timer>> res) {
    if (cb) im.queue_item(Client::Impl::Item{Event{}, [c = cb, res] { c(res); }});
    prom.set_value(std::move(res));
  }
  void page(GroupCursor from) {
    Request r;
    r.op = Op::list_group;
    r.group = group;
    r.from_receiver = from.receiver;
    r.from_tid = from.tid;
    auto self = shared_from_this();
    im.submit(std::move(r), [self, from](Result<Message> m) {
      if (!m) return self->finish(m.error());
      if (m.value().kind == Message::error) return self->finish(m.value().err);
      auto p = decode_group_page(m.value(), from);
      if (!p) return self->finish(p.error());
      for (auto& t : p.value().timers) self->acc.push_back(std::move(t));
      if (p.value().next.end()) return self->finish(std::move(self->acc));
      self->page(p.value().next);
    });
  }
};
}  // namespace

Future<std::uint64_t> Client::pause_all(std::uint64_t receiver, Callback<std::uint64_t> cb) noexcept {
  return bulk(*impl_, Op::pause_all, receiver, 0, false, std::move(cb));
}

Future<std::uint64_t> Client::resume_all(std::uint64_t receiver, Callback<std::uint64_t> cb) noexcept {
  return bulk(*impl_, Op::resume_all, receiver, 0, false, std::move(cb));
}

Future<std::uint64_t> Client::pause_group(std::uint64_t group, Callback<std::uint64_t> cb) noexcept {
  return bulk(*impl_, Op::pause_all, 0, group, true, std::move(cb));
}

Future<std::uint64_t> Client::resume_group(std::uint64_t group, Callback<std::uint64_t> cb) noexcept {
  return bulk(*impl_, Op::resume_all, 0, group, true, std::move(cb));
}

Future<std::uint64_t> Client::cancel_group(std::uint64_t group, Callback<std::uint64_t> cb) noexcept {
  return bulk(*impl_, Op::cancel_group, 0, group, true, std::move(cb));
}

Future<GroupPage> Client::list_group_page(std::uint64_t group, GroupCursor from, std::uint64_t limit,
                                          Callback<GroupPage> cb) noexcept {
  Request r = req(Op::list_group);
  r.group = group;
  r.from_receiver = from.receiver;
  r.from_tid = from.tid;
  r.limit = limit;
  return call<GroupPage>(*impl_, std::move(r), std::move(cb),
                         [from](const Message& m) { return decode_group_page(m, from); });
}

Future<std::vector<Timer>> Client::list_group(std::uint64_t group, Callback<std::vector<Timer>> cb) noexcept {
  auto l = std::make_shared<GroupAll>(*impl_, group, std::move(cb));
  auto fut = l->prom.get_future();
  l->page({});
  return fut;
}

Future<std::uint64_t> Client::ping(Callback<std::uint64_t> cb) noexcept {
  return call<std::uint64_t>(*impl_, req(Op::ping), std::move(cb), first_uint);
}

Future<BindResult> Client::bind(std::uint64_t receiver, const BindOptions& o, Callback<BindResult> cb) noexcept {
  Request r = req(Op::bind);
  r.receiver = receiver;
  r.ephemeral = o.ephemeral;
  r.ack = o.ack;
  Impl* im = impl_.get();
  return call<BindResult>(*impl_, std::move(r), std::move(cb), [im, receiver, o](const Message& m) {
    auto b = decode_bind(m);
    if (b) im->on_bound(receiver, o, b.value());
    return b;
  });
}

Future<Done> Client::unbind(std::uint64_t receiver, Callback<Done> cb) noexcept {
  Request r = req(Op::unbind);
  r.receiver = receiver;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->receivers.erase(receiver);  // not re-bound after a reconnect from now on
  }
  return call<Done>(*impl_, std::move(r), std::move(cb), done);
}

Future<Done> Client::ack(std::uint64_t receiver, std::uint64_t seq, Callback<Done> cb) noexcept {
  Request r = req(Op::ack);
  r.receiver = receiver;
  r.seq = seq;
  return call<Done>(*impl_, std::move(r), std::move(cb), done);
}

Future<FastForwardResult> Client::fast_forward(std::uint64_t ticks, Callback<FastForwardResult> cb) noexcept {
  Request r = req(Op::fast_forward);
  r.ticks = ticks;
  return call<FastForwardResult>(*impl_, std::move(r), std::move(cb), [](const Message& m) -> Result<FastForwardResult> {
    auto u = decode_uints(m, 2);
    if (!u) return u.error();
    return FastForwardResult{u.value()[0], u.value()[1]};
  });
}

Future<std::uint64_t> Client::freeze(Callback<std::uint64_t> cb) noexcept {
  return call<std::uint64_t>(*impl_, req(Op::freeze), std::move(cb), first_uint);
}

Future<std::uint64_t> Client::resume_sync(Callback<std::uint64_t> cb) noexcept {
  return call<std::uint64_t>(*impl_, req(Op::resume_sync), std::move(cb), first_uint);
}

Future<std::uint64_t> Client::set_speed(double speed, Callback<std::uint64_t> cb) noexcept {
  Request r = req(Op::set_speed);
  r.speed = speed;
  return call<std::uint64_t>(*impl_, std::move(r), std::move(cb), first_uint);
}

Future<Stats> Client::stats(Callback<Stats> cb) noexcept {
  return call<Stats>(*impl_, req(Op::stats), std::move(cb), decode_stats);
}

Future<ClusterInfo> Client::cluster(const std::string& command, const std::string& node, const std::string& addr,
                                    Callback<ClusterInfo> cb) noexcept {
  Request r = req(Op::cluster);
  r.command = command;
  r.node = node;
  r.addr = addr;
  return call<ClusterInfo>(*impl_, std::move(r), std::move(cb), decode_cluster);
}

void Client::begin_batch() noexcept {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->batching++;
}

void Client::end_batch() noexcept {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (impl_->batching > 0) impl_->batching--;
  }
  impl_->wake();
}

std::size_t Client::poll(const std::function<void(const Event&)>& fn, std::size_t max) noexcept {
  std::lock_guard<std::mutex> one(impl_->poll_mu);
  std::size_t n = 0;
  std::map<std::uint64_t, std::uint64_t> acks;
  for (; n < max; n++) {
    Impl::Item it;
    bool was_full;
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      if (impl_->items.empty()) break;
      was_full = impl_->items.size() >= impl_->opt.event_buffer;
      it = std::move(impl_->items.front());
      impl_->items.pop_front();
    }
    if (was_full) impl_->wake();  // the I/O thread may read again
    if (it.fn) {
      it.fn();
      continue;
    }
    if (fn) fn(it.ev);
    if (it.ev.kind == EventKind::fire) {
      std::lock_guard<std::mutex> lk(impl_->mu);
      auto r = impl_->receivers.find(it.ev.receiver);
      if (r != impl_->receivers.end() && r->second.opts.ack && r->second.opts.ack_mode == AckMode::automatic &&
          it.ev.seq > r->second.acked) {
        r->second.handled = std::max(r->second.handled, it.ev.seq);
        r->second.acked = r->second.handled;
        acks[it.ev.receiver] = r->second.handled;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    for (auto& [rcv, rs] : impl_->receivers) {
      if (rs.reack == 0) continue;
      acks[rcv] = std::max(acks[rcv], rs.reack);
      rs.reack = 0;
    }
  }
  Impl* im = impl_.get();
  for (auto& [rcv, seq] : acks) {
    Request r = req(Op::ack);
    r.receiver = rcv;
    r.seq = seq;
    // An ack lost with the connection is sent again by the next poll (after
    // the re-bind): the events it covered come again and are removed as
    // duplicates, so no later handler run would ack them.
    impl_->submit(std::move(r), [im, rcv = rcv, seq = seq](Result<Message> m) {
      if (m || m.code() != errc::disconnected) return;
      std::lock_guard<std::mutex> lk(im->mu);
      auto it = im->receivers.find(rcv);
      if (it != im->receivers.end()) it->second.reack = std::max(it->second.reack, seq);
    });
  }
  return n;
}

bool Client::wait_event(std::chrono::milliseconds timeout) noexcept {
  std::unique_lock<std::mutex> lk(impl_->mu);
  return impl_->cv.wait_for(lk, timeout, [this] { return !impl_->items.empty() || impl_->closing; }) &&
         !impl_->items.empty();
}

HelloInfo Client::hello_info() const noexcept {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->hello;
}

std::uint64_t Client::dropped() const noexcept {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->dropped_n;
}

std::uint64_t Client::redelivered() const noexcept {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->redelivered_n;
}

std::uint64_t Client::reconnects() const noexcept {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->reconnects_n;
}

std::string Client::address() const noexcept {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->addr;
}

}  // namespace tickwheel
