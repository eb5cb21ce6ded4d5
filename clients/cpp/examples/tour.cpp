// The README's five-minute tour: connect, bind, add timers three ways,
// fast-forward (admin), and take the events in a game loop with poll().
// Built with -fno-exceptions in CI: the client needs none from its users.
// Usage: tour [host:port [admin-token [ca.pem [client.pem client.key]]]]
#include <cstdio>
#include <string>

#include "tickwheel/tickwheel.hpp"

int main(int argc, char** argv) {
  tickwheel::Options opts;
  opts.addresses = {argc > 1 ? argv[1] : "127.0.0.1:7420"};
  opts.name = "tour";
  opts.token = argc > 2 ? argv[2] : "";  // the admin token: fast_forward needs it
  if (argc > 3) {  // a server with TLS (-tls-cert, -tls-key): the CA that signed its certificate
    opts.tls.enabled = true;
    opts.tls.ca_file = argv[3];
  }
  if (argc > 5) {  // mTLS (-tls-client-ca): this client's certificate and key
    opts.tls.cert_file = argv[4];
    opts.tls.key_file = argv[5];
  }
  auto connected = tickwheel::Client::connect(opts);
  if (!connected) {
    std::fprintf(stderr, "connect: %s\n", connected.error().message.c_str());
    return 1;
  }
  tickwheel::Client& client = *connected.value();
  std::printf("connected, tw-time %llu, a tick is %llu ns\n",
              static_cast<unsigned long long>(client.hello_info().now),
              static_cast<unsigned long long>(client.hello_info().tick_ns));

  // Events of receiver 42 come to this client (and again after reconnects).
  if (auto b = client.bind(42).get(); !b) {
    std::fprintf(stderr, "bind: %s\n", b.error().message.c_str());
    return 1;
  }

  tickwheel::AddOptions regen;
  regen.repeat = 3;
  regen.data = {'r', 'e', 'g', 'e', 'n'};
  client.add(42, 1, 10, regen);                           // 3 times, 10 ticks apart
  client.add_after(42, 2, std::chrono::milliseconds(50)); // once, 50 ms from now
  tickwheel::AddOptions daily;
  daily.repeat = tickwheel::kForever;
  daily.zone = "Europe/Paris";
  client.add_schedule(42, 3, "0 4 * * *", daily);         // daily at 04:00 Paris time

  // Errors are values: nothing throws.
  auto dup = client.add(42, 1, 10).get();
  if (dup.code() == tickwheel::errc::exists) std::printf("tid 1 exists: %s\n", dup.error().message.c_str());

  // Fast-forward 30 ticks (an admin op): timer 1 fires three times, timer 2 once.
  auto ff = client.fast_forward(30).get();
  if (!ff) {
    std::fprintf(stderr, "fast_forward: %s\n", ff.error().message.c_str());
    return 1;
  }

  // The game loop: each frame, poll() runs the handler on this thread.
  int fires = 0;
  for (int frame = 0; frame < 500 && fires < 4; frame++) {
    client.wait_event(std::chrono::milliseconds(10));  // a game would render here instead
    client.poll([&](const tickwheel::Event& e) {
      if (e.kind != tickwheel::EventKind::fire) return;
      fires++;
      std::printf("fired: receiver %llu tid %llu tick %llu (%llu of %llu)%s\n",
                  static_cast<unsigned long long>(e.receiver), static_cast<unsigned long long>(e.tid),
                  static_cast<unsigned long long>(e.tick), static_cast<unsigned long long>(e.fired),
                  static_cast<unsigned long long>(e.repeat), e.last ? ", last" : "");
    });
  }
  auto t = client.get(42, 3).get();
  if (t) std::printf("timer 3 (%s) next fires at tick %llu\n", t.value().schedule.c_str(),
                     static_cast<unsigned long long>(t.value().due));
  return fires == 4 ? 0 : 1;
}
