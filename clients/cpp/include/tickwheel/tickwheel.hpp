// tickwheel C++ client: one connection to a tickwheel server (or a cluster's
// leader), pipelined calls, events polled by the game's own thread.
//
//   auto c = tickwheel::Client::connect({{"127.0.0.1:7420"}, "zone-7"});
//   if (!c) { log(c.error().message); return; }
//   auto& client = *c.value();
//   client.bind(42).get();                         // events of receiver 42 come here
//   client.add(42, 1, 100);                        // once, 100 ticks from now
//   client.add_after(42, 2, std::chrono::seconds(5));
//   // each frame of the game loop:
//   client.poll([](const tickwheel::Event& e) { ... });
//
// Threads: the Client owns one I/O thread (the socket, reconnects, reply
// matching). Every method may be called from any thread. Replies complete
// std::futures on the I/O thread; a Callback given to a call is run by
// poll() instead, on the thread that polls, like events. Events are queued
// (Options::event_buffer) until poll() takes them; while the queue is full
// the Client stops reading its connection (replies wait too: poll, or give
// calls a request_timeout), and the server holds the rest back.
//
// Errors: no function of this header throws. Calls return Result<T>
// (value or Error with a std::error_code of tickwheel::errc).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "tickwheel/protocol.hpp"

namespace tickwheel {

/// repeat value of a timer that fires until cancelled (the wire's 0).
inline constexpr std::uint64_t kForever = 0;

/// TLS to the server's client port (the server's -tls-cert and -tls-key;
/// mTLS with -tls-client-ca: docs/OPERATIONS.md "TLS and mTLS"). TLS 1.2 at
/// least, the server's certificate always verified. Needs the library built
/// with TLS (CMake TICKWHEEL_TLS, ON by default: OpenSSL); without it,
/// connect with enabled fails with errc::tls_failed.
struct TlsOptions {
  bool enabled = false;  ///< connect with TLS; false: plaintext
  /// PEM CA certificates the server's certificate must chain to; "" = the
  /// system's roots.
  std::string ca_file;
  /// PEM client certificate (with its chain) and its key, for a server that
  /// requires one (mTLS); both or none.
  std::string cert_file, key_file;
  /// The name the server's certificate must be valid for (a DNS name or an
  /// IP address); "" = the host of each address dialled.
  std::string server_name;
};

/// Options of Client::connect.
struct Options {
  /// Node addresses, "host:port" each; one element may also hold a
  /// comma-separated list ("a:7420,b:7420,c:7420"). With several, the
  /// Client finds the leader: it follows not_leader (at most max_redirects
  /// in a row from each address) and tries the next address on errors.
  std::vector<std::string> addresses;
  std::string name = "tickwheel-cpp";  ///< the hello name (logs and stats)
  std::string token;                   ///< client or admin token; "" for none
  std::chrono::milliseconds connect_timeout{5000};   ///< per TCP connect + hello
  std::chrono::milliseconds request_timeout{0};      ///< per call; 0 = none
  bool reconnect = true;  ///< reconnect and re-bind after a lost connection
  std::chrono::milliseconds reconnect_min{20}, reconnect_max{2000};  ///< backoff
  std::size_t event_buffer = 1024;  ///< events queued for poll() before the Client stops reading
  int max_redirects = 3;
  TlsOptions tls;  ///< TLS for every address; off by default
};

/// Options of an add. repeat: total firings, 1 by default, kForever (0) for
/// until cancelled; every: ticks between firings, 0 = the first delay.
struct AddOptions {
  std::uint64_t repeat = 1;
  std::uint64_t every = 0;
  std::vector<std::uint8_t> data;
  bool replace = false;
  std::string zone;              ///< add_schedule: IANA zone, "" = UTC
  Missed missed = Missed::all;   ///< firings in a server downtime
  /// The timer's group (a match id, say; 0 = none) for the group calls
  /// (pause_group, resume_group, cancel_group, list_group). A timer is in at
  /// most one group; a group may span receivers.
  std::uint64_t group = 0;
};

/// How a receiver bound in acknowledged mode is acked.
enum class AckMode {
  /// poll() acks an event once the handler returned for it (batched, one
  /// ack per receiver per poll).
  automatic,
  /// The user calls Client::ack after its own work is done.
  manual,
};

struct BindOptions {
  bool ephemeral = false;  ///< cancel the receiver's timers when this session closes
  bool ack = false;        ///< acknowledged mode: at-least-once delivery, kept until acked
  AckMode ack_mode = AckMode::automatic;
};

template <class T>
using Callback = std::function<void(const Result<T>&)>;
template <class T>
using Future = std::future<Result<T>>;

/// Client is one logical connection to tickwheel. Create it with connect();
/// destroy it (or close()) to stop. Thread-safe, except that poll() and
/// wait_event() are meant for one consumer thread at a time.
class Client {
 public:
  /// connect dials the addresses, says hello and starts the I/O thread.
  /// Fails with connect_failed (no node reachable), or the server's error
  /// (unauthorized, unsupported_version).
  /// With Options::tls, a TLS failure (a file that cannot be loaded, a
  /// certificate refused either way) is errc::tls_failed, naming the cause.
  static Result<std::unique_ptr<Client>> connect(Options opts) noexcept;
  /// tls_available: this library was built with TLS (TICKWHEEL_TLS).
  static bool tls_available() noexcept;
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// close stops the I/O thread; calls not answered yet complete with
  /// errc::closed. Idempotent.
  void close() noexcept;

  // --- timers (PROTOCOL.md "Requests"); the uint results are the due tick ---
  /// add: first firing `after` ticks from the current tick (0: the next tick).
  Future<std::uint64_t> add(std::uint64_t receiver, std::uint64_t tid, std::uint64_t after,
                            const AddOptions& o = {}, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// add_at: first firing at tick `at` (a past tick fires at the next tick).
  Future<std::uint64_t> add_at(std::uint64_t receiver, std::uint64_t tid, std::uint64_t at,
                               const AddOptions& o = {}, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// add_after: first firing `d` of tw-time after the server reads the
  /// request (never early). Sends after_ns, and `after` rounded up for old servers.
  Future<std::uint64_t> add_after(std::uint64_t receiver, std::uint64_t tid, std::chrono::nanoseconds d,
                                  const AddOptions& o = {}, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// add_schedule: a cron expression or descriptor ("0 4 * * *", "@every 90s"),
  /// read in o.zone; o.every must be 0.
  Future<std::uint64_t> add_schedule(std::uint64_t receiver, std::uint64_t tid, const std::string& schedule,
                                     const AddOptions& o = {}, Callback<std::uint64_t> cb = nullptr) noexcept;
  Future<Done> cancel(std::uint64_t receiver, std::uint64_t tid, Callback<Done> cb = nullptr) noexcept;
  Future<Timer> get(std::uint64_t receiver, std::uint64_t tid, Callback<Timer> cb = nullptr) noexcept;
  /// list_page: one page of timers with tid >= from_tid (limit 0 = the server's max).
  Future<ListPage> list_page(std::uint64_t receiver, std::uint64_t from_tid = 0, std::uint64_t limit = 0,
                             Callback<ListPage> cb = nullptr) noexcept;
  /// list: every timer of the receiver in tid order, page by page (not a snapshot).
  Future<std::vector<Timer>> list(std::uint64_t receiver, Callback<std::vector<Timer>> cb = nullptr) noexcept;
  /// cancel_all: the count of timers cancelled.
  Future<std::uint64_t> cancel_all(std::uint64_t receiver, Callback<std::uint64_t> cb = nullptr) noexcept;
  Future<Done> pause(std::uint64_t receiver, std::uint64_t tid, Callback<Done> cb = nullptr) noexcept;
  Future<Done> resume(std::uint64_t receiver, std::uint64_t tid, Callback<Done> cb = nullptr) noexcept;

  // --- bulk operations (PROTOCOL.md "Bulk operations") ---
  // One request each; the server does a large one in chunks between its
  // other work (the reply comes when it is complete). Each covers the timers
  // there when the server applied it, never one added later; a timer that
  // comes due before the server reaches it fires first. Under the server's
  // add_only_bound, a receiver's call needs the receiver bound here, a
  // group's every receiver with timers in the group (else unauthorized).
  // pause_group, resume_group and cancel_group refuse group 0 with
  // bad_argument, without sending.
  // A server that predates groups answers unknown_op.
  /// pause_all: pauses every running timer of the receiver, each keeping the
  /// ticks it had left; until resume_all, timers added to it start paused.
  /// The count of timers paused.
  Future<std::uint64_t> pause_all(std::uint64_t receiver, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// resume_all: resumes every paused timer of the receiver (however it was
  /// paused) with the ticks it had left, and clears the mark. The count resumed.
  Future<std::uint64_t> resume_all(std::uint64_t receiver, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// pause_group / resume_group: pause_all / resume_all over a group's timers,
  /// whatever their receivers. The marks are independent of the receivers'.
  Future<std::uint64_t> pause_group(std::uint64_t group, Callback<std::uint64_t> cb = nullptr) noexcept;
  Future<std::uint64_t> resume_group(std::uint64_t group, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// cancel_group: removes every timer of the group; the count removed.
  Future<std::uint64_t> cancel_group(std::uint64_t group, Callback<std::uint64_t> cb = nullptr) noexcept;
  /// list_group_page: one page of the group's live timers from `from` on, in
  /// (receiver, tid) order (limit 0 = the server's max); the page's next is
  /// where the following one starts, {0, 0} when this is the last. An
  /// unknown group gives an empty last page.
  Future<GroupPage> list_group_page(std::uint64_t group, GroupCursor from = {}, std::uint64_t limit = 0,
                                    Callback<GroupPage> cb = nullptr) noexcept;
  /// list_group: every timer of the group, page by page (not a snapshot, as list).
  Future<std::vector<Timer>> list_group(std::uint64_t group, Callback<std::vector<Timer>> cb = nullptr) noexcept;

  /// ping: tw-time now.
  Future<std::uint64_t> ping(Callback<std::uint64_t> cb = nullptr) noexcept;

  // --- receivers ---
  /// bind: events of the receiver come to this Client (and again after each
  /// reconnect: the Client re-binds by itself). A nonzero dropped count is
  /// also delivered as a dropped Event ahead of the events that follow.
  Future<BindResult> bind(std::uint64_t receiver, const BindOptions& o = {},
                          Callback<BindResult> cb = nullptr) noexcept;
  Future<Done> unbind(std::uint64_t receiver, Callback<Done> cb = nullptr) noexcept;
  /// ack: every event of the receiver up to seq is handled (acknowledged mode).
  Future<Done> ack(std::uint64_t receiver, std::uint64_t seq, Callback<Done> cb = nullptr) noexcept;

  // --- admin (need the admin token) ---
  Future<FastForwardResult> fast_forward(std::uint64_t ticks, Callback<FastForwardResult> cb = nullptr) noexcept;
  Future<std::uint64_t> freeze(Callback<std::uint64_t> cb = nullptr) noexcept;
  Future<std::uint64_t> resume_sync(Callback<std::uint64_t> cb = nullptr) noexcept;
  Future<std::uint64_t> set_speed(double speed, Callback<std::uint64_t> cb = nullptr) noexcept;
  Future<Stats> stats(Callback<Stats> cb = nullptr) noexcept;
  Future<ClusterInfo> cluster(const std::string& command, const std::string& node = "",
                              const std::string& addr = "", Callback<ClusterInfo> cb = nullptr) noexcept;

  /// begin_batch / end_batch: calls made in between are written together
  /// (one write for thousands of adds). Batches nest; end_batch flushes at 0.
  void begin_batch() noexcept;
  void end_batch() noexcept;

  // --- events ---
  /// poll runs fn for up to max queued events, in the order the server sent
  /// them, and the Callbacks of completed calls, on the calling thread;
  /// returns how many items it ran. Then sends the automatic acks due.
  std::size_t poll(const std::function<void(const Event&)>& fn, std::size_t max = SIZE_MAX) noexcept;
  /// wait_event blocks until an item is queued for poll (or timeout); true if one is.
  bool wait_event(std::chrono::milliseconds timeout) noexcept;

  // --- state ---
  /// The last hello's result (session, tick_ns, limits).
  HelloInfo hello_info() const noexcept;
  /// Events the server reported dropped (bind counts, notices, seq gaps), in total.
  std::uint64_t dropped() const noexcept;
  /// Events delivered again in acknowledged mode that this Client had delivered, and removed.
  std::uint64_t redelivered() const noexcept;
  /// How many times the Client has connected again after losing its connection.
  std::uint64_t reconnects() const noexcept;
  /// The address of the node it is connected to ("" while disconnected).
  std::string address() const noexcept;

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tickwheel
