// The C++ client's throughput against a running server, the measurements
// of loadtest/cmd/gobench:
//   - adds/s one at a time (each waits for its reply) and pipelined
//     (batches of 1000 in one write, then their replies);
//   - fires/s: n one-shot timers over 64 receivers bound by this client, all
//     due on one tick (added beforehand, not timed), fast-forwarded over,
//     every event taken with poll().
// Prints one JSON line.
// Usage: tickwheel_bench host:port admin-token [n]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tickwheel/tickwheel.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kReceivers = 64;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// add_batched adds n one-shot timers (receiver base + i % spread, tid i + 1,
// due after ticks) in batches of 1000, each batch's replies awaited.
bool add_batched(tickwheel::Client& c, std::uint64_t base, std::uint64_t spread, std::uint64_t n, std::uint64_t after) {
  std::vector<tickwheel::Future<std::uint64_t>> fs;
  fs.reserve(1000);
  for (std::uint64_t i = 0; i < n; i += 1000) {
    c.begin_batch();
    for (std::uint64_t j = i; j < i + 1000 && j < n; j++) fs.push_back(c.add(base + j % spread, j + 1, after));
    c.end_batch();
    for (auto& f : fs) {
      auto r = f.get();
      if (!r) {
        std::fprintf(stderr, "add: %s\n", r.error().message.c_str());
        return false;
      }
    }
    fs.clear();
  }
  return true;
}

// fires measures events per second as gobench's measureFires does; 0 on error.
double fires(tickwheel::Client& c, std::uint64_t base, std::uint64_t n) {
  for (std::uint64_t r = 0; r < kReceivers; r++) {
    if (!c.bind(base + r).get()) return 0;
  }
  if (!add_batched(c, base, kReceivers, n, 1)) return 0;
  auto t0 = Clock::now();
  auto ff = c.fast_forward(1);  // its reply follows the events, which wait for poll
  std::uint64_t got = 0;
  while (got < n) {
    if (!c.wait_event(std::chrono::seconds(60))) {
      std::fprintf(stderr, "events stopped after %llu of %llu\n", static_cast<unsigned long long>(got),
                   static_cast<unsigned long long>(n));
      return 0;
    }
    c.poll([&](const tickwheel::Event& e) {
      if (e.kind == tickwheel::EventKind::fire) got++;
    });
  }
  const double s = seconds_since(t0);
  if (!ff.get()) return 0;
  for (std::uint64_t r = 0; r < kReceivers; r++) c.unbind(base + r).get();
  return n / s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s host:port admin-token [n]\n", argv[0]);
    return 2;
  }
  const std::uint64_t n = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 20000;
  tickwheel::Options o;
  o.addresses = {argv[1]};
  o.token = argv[2];
  o.name = "bench-cpp";
  o.event_buffer = 1 << 16;  // as gobench's WithEventBuffer(1<<16)
  auto c = tickwheel::Client::connect(o);
  if (!c) {
    std::fprintf(stderr, "connect: %s\n", c.error().message.c_str());
    return 1;
  }
  auto& cl = *c.value();
  const std::uint64_t base = 3'000'000'000ULL + static_cast<std::uint64_t>(Clock::now().time_since_epoch().count() % 1000) * 10'000;
  auto t0 = Clock::now();
  for (std::uint64_t i = 0; i < n; i++) {
    if (!cl.add(base, i + 1, 1000000).get()) return 1;
  }
  const double single = n / seconds_since(t0);
  cl.cancel_all(base).get();
  t0 = Clock::now();
  if (!add_batched(cl, base, 1, n, 1000000)) return 1;
  const double piped = n / seconds_since(t0);
  cl.cancel_all(base).get();
  const double fired = fires(cl, base + 5000, n);
  if (fired == 0) return 1;
  std::printf("{\"client\":\"cpp\",\"n\":%llu,\"adds_per_s_single\":%.0f,\"adds_per_s_pipelined\":%.0f,\"fires_per_s\":%.0f}\n",
              static_cast<unsigned long long>(n), single, piped, fired);
  return 0;
}
