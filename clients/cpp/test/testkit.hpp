// Test helpers: the real tickwheel server binary, a TCP relay whose
// connections a test can cut, and event taking with a deadline.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tickwheel/tickwheel.hpp"

namespace testkit {

inline const char* const kAdminToken = "cpp-test-admin-token";

/// server_binary is $TICKWHEEL_BIN (CI builds it once), else one built
/// here with go build from the repository.
std::string server_binary();

/// Server is a running tickwheel process on a loopback port, in memory
/// (data_dir "") or persistent, frozen at tick 1000 unless args say
/// otherwise, with kAdminToken as its admin token and no HTTP listener.
class Server {
 public:
  static std::unique_ptr<Server> start(std::vector<std::string> args = {"-frozen", "-start-tick", "1000"},
                                       const std::string& data_dir = "", const std::string& addr = "127.0.0.1:0");
  ~Server();
  /// stop sends SIGTERM (or SIGKILL with kill) and waits for the exit.
  void stop(bool kill = false);
  const std::string& addr() const { return addr_; }

 private:
  pid_t pid_ = -1;
  std::string addr_;
  std::thread drain_;
};

/// options for a client of addr; admin gives it the admin token.
tickwheel::Options options(const std::string& addr, bool admin = true);

/// connect connects or fails the test (returns nullptr then).
std::unique_ptr<tickwheel::Client> connect(const std::string& addr, bool admin = true);

/// take polls c until n events of kind (fire by default) arrived or ms
/// passed; events of other kinds are kept in *others when given.
std::vector<tickwheel::Event> take(tickwheel::Client& c, std::size_t n, int ms = 5000,
                                   tickwheel::EventKind kind = tickwheel::EventKind::fire,
                                   std::vector<tickwheel::Event>* others = nullptr);

/// make_certs writes a CA, a server certificate for localhost and
/// 127.0.0.1, and a client certificate signed by that CA (ca.pem,
/// server.pem/.key, client.pem/.key) to a new temporary directory with the
/// server binary's `tickwheel certs`, and returns the directory ("" and a
/// test failure when that fails). Each call makes a new CA.
std::string make_certs();

/// Relay forwards TCP connections to a target; cut() resets all of them.
class Relay {
 public:
  explicit Relay(std::string target);
  ~Relay();
  const std::string& addr() const { return addr_; }
  /// cut closes every connection through the relay; returns how many.
  int cut();
  /// blackhole makes the relay discard what clients send (until cut) while
  /// still passing what servers send: requests then die in flight.
  void blackhole() { blackhole_ = true; }
  /// deafen makes the relay discard what servers send (until cut) while
  /// still passing what clients send: requests are applied, their replies lost.
  void deafen() { deaf_ = true; }

 private:
  void loop();
  std::string target_, addr_;
  int lfd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false}, cut_{false}, blackhole_{false}, deaf_{false};
  std::atomic<int> cut_count_{0};
  std::thread th_;
};

}  // namespace testkit
