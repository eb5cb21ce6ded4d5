// tickwheel wire protocol, version 1 (docs/PROTOCOL.md): the frames a client
// sends and reads, as plain C++ values. Pure functions over bytes: no I/O, no
// threads, no exceptions (the msgpack library is used inside protocol.cpp
// only, so this header drops into a build without it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace tickwheel {

/// The wire version this client speaks (hello's version).
inline constexpr std::uint64_t kProtocolVersion = 1;

/// Error codes: 1-14 and 17 are the server's (PROTOCOL.md "Error codes", same
/// numbers); 100 and above are this client's own. Use them through
/// std::error_code: `err.code == tickwheel::errc::not_found`.
enum class errc : int {
  malformed = 1,
  unknown_op = 2,
  unauthorized = 3,
  hello_required = 4,
  not_found = 5,
  exists = 6,
  invalid_argument = 7,
  limit_exceeded = 8,
  bad_state = 9,
  unsupported_version = 10,
  internal = 11,
  timeout = 12,
  unavailable = 13,
  not_leader = 14,
  /// A change sent again with its request id (client, id) met a different
  /// request the server remembers under that id: a client bug (ids reused
  /// within request_id_ticks). Nothing was changed.
  request_id_reused = 17,
  /// The connection dropped while the call was in flight: the server may or
  /// may not have applied it (get tells; an add with replace is safe to repeat).
  /// A change sent with a request id is sent again by itself instead, unless
  /// reconnect is off or the new server does not deduplicate retries.
  disconnected = 100,
  /// The Client was closed (or is closing): the call was not sent.
  closed = 101,
  /// The call's deadline (Options::request_timeout) ran out before its reply.
  /// The request may still be applied.
  request_timeout = 102,
  /// The server sent bytes this client cannot read as the reply it expected.
  protocol_error = 103,
  /// No node of the address list could be reached (or said hello).
  connect_failed = 104,
  /// A local argument error caught before sending (e.g. an empty address list).
  bad_argument = 105,
  /// TLS could not be set up: a file of TlsOptions cannot be loaded, the
  /// server's certificate was not accepted (unknown CA, another name,
  /// expired), the server refused the client certificate or requires one
  /// (mTLS), or this library was built without TLS (TICKWHEEL_TLS=OFF).
  /// The message names the address and the cause.
  tls_failed = 106,
};

/// The error category of errc ("tickwheel").
const std::error_category& category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }
/// The protocol's name of a server code ("not_found"), or "code N".
std::string code_name(int code);

/// Error is what a failed call returns: its code, the server's message (for
/// humans; it may change between versions), and for not_leader the leader's
/// client address the server named ("" when none).
struct Error {
  std::error_code code;
  std::string message;
  std::string leader;
};

/// Result holds a value or an Error; it never throws. Check ok() (or the
/// bool conversion) before value(): value() of a failed result is a
/// default-constructed T.
template <class T>
class Result {
 public:
  Result(T v) : v_(std::move(v)) {}  // NOLINT: implicit by design
  Result(Error e) : err_(std::move(e)) {}  // NOLINT
  bool ok() const noexcept { return v_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  const T& value() const& noexcept { return v_ ? *v_ : empty(); }
  T& value() & noexcept {
    if (!v_) v_.emplace();
    return *v_;
  }
  const Error& error() const noexcept { return err_; }
  /// code() is the error's code, or a zero error_code when ok.
  std::error_code code() const noexcept { return err_.code; }

 private:
  static const T& empty() noexcept {
    static const T e{};
    return e;
  }
  std::optional<T> v_;
  Error err_;
};

/// Done is the value of calls whose OK result is empty (cancel, pause, ...).
struct Done {};

/// Ops (PROTOCOL.md "Requests").
enum class Op : std::uint64_t {
  hello = 1, bind = 2, unbind = 3, add = 4, cancel = 5, get = 6, list = 7, cancel_all = 8,
  pause = 9, resume = 10, ping = 11, ack = 12,
  pause_all = 13, resume_all = 14, list_group = 15, cancel_group = 16,
  fast_forward = 20, freeze = 21, resume_sync = 22, set_speed = 23, stats = 24, cluster = 25,
};

/// Missed-firing policy of an add (PROTOCOL.md "Missed firings").
enum class Missed : std::uint64_t { all = 0, once = 1, skip = 2 };

/// Request is one request in meaning: the op, the id, and every argument
/// (those the op does not take are ignored by encode_request).
struct Request {
  Op op = Op::ping;
  std::uint64_t id = 0;
  std::uint64_t version = 0;
  std::string name, token;
  std::uint64_t receiver = 0, tid = 0, after = 0, at = 0, every = 0, repeat = 0;
  std::vector<std::uint8_t> data;  // empty = no data (sent as nil)
  bool replace = false, ephemeral = false, ack = false;
  std::uint64_t after_ns = 0;
  std::string schedule, zone;
  std::uint64_t missed = 0;
  std::uint64_t group = 0;   ///< add's group; pause_all/resume_all/list_group/cancel_group's group
  std::uint64_t client = 0;  ///< request id's client (add, cancel, pause, resume, the bulk ops); 0 = none
  std::uint64_t from_receiver = 0;  ///< list_group's cursor, with from_tid
  std::uint64_t from_tid = 0, limit = 0, seq = 0, ticks = 0;
  double speed = 0;
  std::string command, node, addr;
};

/// encode_request appends r's frame (length header and msgpack array) to
/// out, exactly as the Go encoder does: add's later arguments (after_ns,
/// schedule, zone, missed, group, client) only up to the last one set, and
/// the client of cancel, pause, resume and the bulk ops (cancel_all,
/// pause_all, resume_all, cancel_group) only when set.
void encode_request(const Request& r, std::vector<std::uint8_t>& out);

/// A timer as get and list return it.
struct Timer {
  std::uint64_t receiver = 0, tid = 0, due = 0, remaining = 0, every = 0, fired = 0;
  std::uint64_t repeat = 0;  ///< total firings, 0 = forever
  bool paused = false;
  std::vector<std::uint8_t> data;
  std::string schedule, zone;
  Missed missed = Missed::all;
  std::uint64_t group = 0;  ///< 0 = in no group
};

struct HelloInfo {
  std::uint64_t session = 0, now = 0, tick_ns = 0;
  std::string server_version;
  std::map<std::string, std::uint64_t> limits;  ///< absent key = that limit is off
};

struct BindResult {
  std::uint64_t delivered = 0, dropped = 0;
  std::uint64_t first_seq = 0;  ///< 0 from servers before acknowledged mode
};

struct ListPage {
  std::vector<Timer> timers;
  std::uint64_t next = 0;  ///< from_tid of the next page; 0 = no more
};

/// GroupCursor is list_group's position: the (receiver, tid) key a page
/// starts from. {0, 0} is the start and, as a page's next, the end.
struct GroupCursor {
  std::uint64_t receiver = 0, tid = 0;
  bool end() const { return receiver == 0 && tid == 0; }
};

/// GroupPage is one page of list_group: timers in ascending (receiver, tid)
/// order, and the key of the first one left out ({0, 0} = no more).
struct GroupPage {
  std::vector<Timer> timers;
  GroupCursor next;
};

struct FastForwardResult {
  std::uint64_t now = 0, fired = 0;
};

/// Stats: the stats map by value type (unknown keys land in the map of their type).
struct Stats {
  std::map<std::string, std::uint64_t> uints;
  std::map<std::string, std::string> strings;
  std::map<std::string, bool> bools;
  std::map<std::string, double> floats;
  std::uint64_t get(const std::string& k) const {
    auto it = uints.find(k);
    return it == uints.end() ? 0 : it->second;
  }
};

struct ClusterMember {
  std::string id, raft_addr;
  bool voter = false;
};

struct ClusterInfo {
  std::string role, leader;
  std::uint64_t term = 0, commit_index = 0, applied_index = 0;
  std::vector<ClusterMember> members;
};

/// Event kinds pushed by the server (2, 3, 4) and this client's own.
enum class EventKind {
  fire = 2,
  takeover = 3,
  /// Events the server gave up on: a dropped notice (first_seq..last_seq),
  /// a bind's dropped count, or a gap in seq (count; first_seq/last_seq when known).
  dropped = 4,
  /// This client lost its connection (it reconnects by itself).
  disconnected = 100,
  /// This client connected again, said hello and re-bound its receivers.
  reconnected = 101,
};

struct Event {
  EventKind kind = EventKind::fire;
  std::uint64_t receiver = 0;
  // fire
  std::uint64_t tid = 0, tick = 0, fired = 0, repeat = 0, seq = 0, late = 0;
  bool last = false;
  std::vector<std::uint8_t> data;
  // takeover
  std::uint64_t session = 0;
  // dropped
  std::uint64_t first_seq = 0, last_seq = 0, count = 0;
  // disconnected / reconnected
  std::string detail;
};

namespace detail {
struct Payload;  // the decoded msgpack value, owned by the Message
}

/// Message is one server message: a reply (ok/error) or a push.
struct Message {
  enum Kind { ok = 0, error = 1, push = 2, unknown = 99 } kind = unknown;
  std::uint64_t id = 0;
  Error err;    ///< kind error
  Event event;  ///< kind push (fire, takeover, dropped)
  std::uint64_t kind_code = 0;
  std::shared_ptr<const detail::Payload> payload;  ///< kind ok: the result, read by decode_*
};

/// decode_message reads one frame's payload (without the length header).
/// Unknown kinds come back as Message::unknown (to be ignored).
Result<Message> decode_message(const std::uint8_t* p, std::size_t n);

/// FrameReader splits a byte stream into frame payloads.
class FrameReader {
 public:
  void feed(const std::uint8_t* p, std::size_t n) { buf_.insert(buf_.end(), p, p + n); }
  /// next sets payload to the next whole frame's payload and returns true, or
  /// returns false when none is complete yet. A zero length sets bad().
  bool next(std::vector<std::uint8_t>& payload);
  bool bad() const { return bad_; }

 private:
  std::vector<std::uint8_t> buf_;
  std::size_t off_ = 0;
  bool bad_ = false;
};

// Result decoders: an ok Message's result read by the op it answers.
Result<HelloInfo> decode_hello(const Message& m);
Result<BindResult> decode_bind(const Message& m);
/// decode_uints reads a result of uints (add: [due], ping: [now], ...);
/// missing trailing elements are 0.
Result<std::vector<std::uint64_t>> decode_uints(const Message& m, std::size_t n);
Result<Timer> decode_get(const Message& m);
Result<ListPage> decode_list(const Message& m);
Result<GroupPage> decode_list_group(const Message& m);
Result<Stats> decode_stats(const Message& m);
Result<ClusterInfo> decode_cluster(const Message& m);

}  // namespace tickwheel

namespace std {
template <>
struct is_error_code_enum<tickwheel::errc> : true_type {};
}  // namespace std
