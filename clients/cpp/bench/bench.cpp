// Adds per second against a running server, one at a time (each waits for
// its reply) and pipelined (batches of 1000 in one write).
// Usage: tickwheel_bench host:port [n]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tickwheel/tickwheel.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s host:port [n]\n", argv[0]);
    return 2;
  }
  const std::uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20000;
  tickwheel::Options o;
  o.addresses = {argv[1]};
  o.name = "cpp-bench";
  auto c = tickwheel::Client::connect(o);
  if (!c) {
    std::fprintf(stderr, "connect: %s\n", c.error().message.c_str());
    return 1;
  }
  auto& cl = *c.value();
  const std::uint64_t receiver = 0x6265 + static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
  auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < n; i++) {
    if (!cl.add(receiver, i + 1, 1000000).get()) return 1;
  }
  double single = n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cl.cancel_all(receiver).get();
  t0 = std::chrono::steady_clock::now();
  std::vector<tickwheel::Future<std::uint64_t>> fs;
  fs.reserve(1000);
  for (std::uint64_t i = 0; i < n; i += 1000) {
    cl.begin_batch();
    for (std::uint64_t j = i; j < i + 1000 && j < n; j++) fs.push_back(cl.add(receiver, j + 1, 1000000));
    cl.end_batch();
    for (auto& f : fs) {
      if (!f.get()) return 1;
    }
    fs.clear();
  }
  double piped = n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cl.cancel_all(receiver).get();
  std::printf("cpp client: %llu adds: single %.0f adds/s, pipelined (batches of 1000) %.0f adds/s\n",
              static_cast<unsigned long long>(n), single, piped);
  return 0;
}
