// Client::Impl: the state shared by the API (any thread), the I/O thread
// and poll() (internal header).
#pragma once


#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "net.hpp"
#include "tickwheel/tickwheel.hpp"

namespace tickwheel {
namespace detail {
using Clock = std::chrono::steady_clock;
}

struct Client::Impl {
  /// Handler completes one call with its reply (ok or error) or a local error.
  using Handler = std::function<void(Result<Message>)>;
  struct Pending {
    std::uint64_t id;
    Handler done;
    detail::Clock::time_point deadline;
    bool has_deadline = false;
    bool finished = false;  ///< timed out: the reply, when it comes, is skipped
    /// The request, kept to be sent again with the same id on the next
    /// connection: a read (is_read) after not_leader; a change sent with a
    /// request id (client) after not_leader or a lost connection.
    std::optional<Request> retry;
    bool change = false;  ///< retry is a change with a request id
    bool sent = false;    ///< retry was written to a connection at least once
  };
  /// Item is one entry of the poll queue: an event, or a Callback to run.
  struct Item {
    Event ev;
    std::function<void()> fn;
  };
  /// Recv is what the Client keeps per bound receiver.
  struct Recv {
    BindOptions opts;
    std::uint64_t expect = 0;         ///< next seq expected (0: unknown)
    std::uint64_t max_delivered = 0;  ///< highest seq queued for poll (duplicates at or below are removed in ack mode)
    std::uint64_t handled = 0;        ///< highest seq poll() ran the handler for (automatic acks)
    std::uint64_t acked = 0;          ///< highest seq acked automatically
    std::uint64_t reack = 0;          ///< an automatic ack lost with a connection: poll() sends it again
  };

  explicit Impl(Options o);
  ~Impl();

  void submit(Request r, Handler h);
  void run();  ///< the I/O thread's loop
  void wake();
  void queue_item(Item it);
  void push_event(Event e);
  void on_push(Event& e);
  void on_fire(Event& e);
  void on_bound(std::uint64_t receiver, const BindOptions& o, const BindResult& b);
  void handle(Result<Message> m);
  void lose(const std::string& why);
  void fail_waiting(errc code, const std::string& why);
  void expire_waiting();
  /// requeue keeps a call for the next connection: a change sent with a
  /// request id, or, after not_leader, a read; false when it is neither (or
  /// reconnect is off). Called with mu held.
  bool requeue(Pending& p, bool not_leader);
  void adopt(detail::Dialed d, bool again);
  void reconnect();
  int poll_timeout();
  void expire();

  const Options opt;
  std::vector<std::string> addrs;
  detail::WakePipe waker;  ///< wakes the I/O thread out of poll (wake())
  std::thread io;

  mutable std::mutex mu;
  std::condition_variable cv;  ///< items queued; closing
  bool connected = false, closing = false, dead = false;
  detail::Conn conn;  ///< the current connection (none while disconnected); read and written by the I/O thread
  std::shared_ptr<detail::TlsContext> tls;  ///< set before the I/O thread starts; null without TLS
  std::string addr, leader_hint;
  /// The current connection answered not_leader: the node stepped down or
  /// is a follower, and closes it. Reads lost with it are asked again of
  /// the leader, as the not_leader one is.
  bool stepped_down = false;
  HelloInfo hello;
  std::vector<std::uint8_t> out;  ///< frames not yet written
  std::deque<Pending> inflight;   ///< written (or in out), in request order
  std::vector<std::pair<Request, Pending>> waiting;  ///< made while disconnected
  FrameReader reader;             ///< owned by the I/O thread
  std::uint64_t next_id = 2;      ///< 1 is the hello's; never restarts (request ids)
  /// This Client's request-id client: random, non-zero, for its whole life.
  const std::uint64_t client_id;
  int batching = 0;
  detail::Clock::time_point last_write;
  std::deque<Item> items;
  std::map<std::uint64_t, Recv> receivers;
  std::uint64_t dropped_n = 0, redelivered_n = 0, reconnects_n = 0;
  std::mutex poll_mu;  ///< one poll() at a time
};

}  // namespace tickwheel
