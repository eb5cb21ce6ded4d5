// Socket helpers of the client (internal): TCP connect with a deadline and
// the hello handshake, with not_leader following over an address list.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "tickwheel/tickwheel.hpp"

namespace tickwheel::detail {

/// Dialed is a connection that said hello: its socket (blocking mode off)
/// and the hello result.
struct Dialed {
  int fd = -1;
  HelloInfo hello;
  std::string addr;
};

/// split_addresses flattens "a:1,b:2" elements into one list.
std::vector<std::string> split_addresses(const std::vector<std::string>& in);

/// dial tries `first` (when not empty), then each address of the list:
/// connects, says hello, follows not_leader naming a leader at most
/// max_redirects times in a row from each. Fails with the server's error
/// for unauthorized / unsupported_version (no other node would say
/// otherwise), else connect_failed naming the last failure.
Result<Dialed> dial(const std::vector<std::string>& addrs, const std::string& first, const Options& o);

/// close_fd closes a socket, ignoring errors.
void close_fd(int fd) noexcept;

}  // namespace tickwheel::detail
