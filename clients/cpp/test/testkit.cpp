#include "testkit.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <gtest/gtest.h>

namespace testkit {

std::string server_binary() {
  static std::once_flag once;
  static std::string bin;
  std::call_once(once, [] {
    if (const char* env = std::getenv("TICKWHEEL_BIN"); env && *env) {
      bin = env;
      return;
    }
    char dir[] = "/tmp/tickwheel-cpp-XXXXXX";
    if (!mkdtemp(dir)) return;
    bin = std::string(dir) + "/tickwheel";
    std::string cmd = "cd '" TICKWHEEL_REPO "' && go build -o '" + bin + "' ./cmd/tickwheel";
    if (std::system(cmd.c_str()) != 0) bin.clear();
  });
  return bin;
}

std::string make_certs() {
  std::string bin = server_binary();
  char dir[] = "/tmp/tickwheel-cpp-certs-XXXXXX";
  if (bin.empty() || !mkdtemp(dir)) {
    ADD_FAILURE() << "no tickwheel binary or temporary directory for certificates";
    return "";
  }
  std::string out = std::string(dir) + "/certs";
  std::string cmd = "'" + bin + "' certs -dir '" + out + "' -hosts localhost,127.0.0.1 >/dev/null";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "tickwheel certs failed: " << cmd;
    return "";
  }
  return out;
}

std::unique_ptr<Server> Server::start(std::vector<std::string> args, const std::string& data_dir,
                                      const std::string& addr) {
  std::string bin = server_binary();
  if (bin.empty()) {
    ADD_FAILURE() << "no tickwheel binary (set TICKWHEEL_BIN or have go)";
    return nullptr;
  }
  std::vector<std::string> argv = {bin, "-addr", addr, "-data-dir", data_dir, "-log-level", "warn", "-http-addr", "off"};
  argv.insert(argv.end(), args.begin(), args.end());
  int p[2];
  if (pipe(p) != 0) return nullptr;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    setenv("TICKWHEEL_ADMIN_TOKEN", kAdminToken, 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(p[1]);
  auto s = std::unique_ptr<Server>(new Server());
  s->pid_ = pid;
  std::string out;
  char buf[512];
  const std::string mark = "tickwheel listening on ";
  while (true) {
    ssize_t n = read(p[0], buf, sizeof buf);
    if (n <= 0) {
      ADD_FAILURE() << "tickwheel exited before listening: " << out;
      close(p[0]);
      return nullptr;
    }
    out.append(buf, static_cast<std::size_t>(n));
    auto at = out.find(mark);
    if (at != std::string::npos) {
      auto end = out.find_first_of(" \n", at + mark.size());
      if (end != std::string::npos) {
        s->addr_ = out.substr(at + mark.size(), end - at - mark.size());
        break;
      }
    }
  }
  int fd = p[0];
  s->drain_ = std::thread([fd] {  // keep the server's stdout from filling up
    char b[512];
    while (read(fd, b, sizeof b) > 0) {
    }
    close(fd);
  });
  return s;
}

void Server::stop(bool kill) {
  if (pid_ > 0) {
    ::kill(pid_, kill ? SIGKILL : SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  if (drain_.joinable()) drain_.join();
}

Server::~Server() { stop(); }

tickwheel::Options options(const std::string& addr, bool admin) {
  tickwheel::Options o;
  o.addresses = {addr};
  o.name = "cpp-test";
  if (admin) o.token = kAdminToken;
  o.reconnect_min = std::chrono::milliseconds(10);
  o.reconnect_max = std::chrono::milliseconds(200);
  return o;
}

std::unique_ptr<tickwheel::Client> connect(const std::string& addr, bool admin) {
  auto c = tickwheel::Client::connect(options(addr, admin));
  if (!c) {
    ADD_FAILURE() << "connect " << addr << ": " << c.error().message;
    return nullptr;
  }
  return std::move(c.value());
}

std::vector<tickwheel::Event> take(tickwheel::Client& c, std::size_t n, int ms, tickwheel::EventKind kind,
                                   std::vector<tickwheel::Event>* others) {
  std::vector<tickwheel::Event> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
    c.wait_event(std::chrono::milliseconds(20));
    c.poll(
        [&](const tickwheel::Event& e) {
          if (e.kind == kind && got.size() < n) {
            got.push_back(e);
          } else if (others) {
            others->push_back(e);
          }
        },
        n - got.size());
  }
  return got;
}

namespace {
int connect_to(const std::string& addr) {
  auto colon = addr.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
  inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}
}  // namespace

Relay::Relay(std::string target) : target_(std::move(target)) {
  lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(lfd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  listen(lfd_, 16);
  socklen_t len = sizeof sa;
  getsockname(lfd_, reinterpret_cast<sockaddr*>(&sa), &len);
  addr_ = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  if (pipe(wake_) != 0) return;
  th_ = std::thread([this] { loop(); });
}

Relay::~Relay() {
  stop_ = true;
  [[maybe_unused]] ssize_t n = write(wake_[1], "x", 1);
  if (th_.joinable()) th_.join();
  close(lfd_);
  close(wake_[0]);
  close(wake_[1]);
}

int Relay::cut() {
  cut_ = true;
  [[maybe_unused]] ssize_t n = write(wake_[1], "x", 1);
  while (cut_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return cut_count_;
}

// loop forwards bytes both ways for every pair, on one thread.
void Relay::loop() {
  std::vector<std::pair<int, int>> pairs;
  auto drop_all = [&] {
    for (auto& [a, b] : pairs) {
      linger lg{1, 0};  // a reset, as a dropped connection looks
      setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      close(a);
      close(b);
    }
    int n = static_cast<int>(pairs.size());
    pairs.clear();
    return n;
  };
  while (!stop_) {
    std::vector<pollfd> pf = {{lfd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    for (auto& [a, b] : pairs) {
      pf.push_back({a, POLLIN, 0});
      pf.push_back({b, POLLIN, 0});
    }
    ::poll(pf.data(), pf.size(), 200);
    if (pf[1].revents & POLLIN) {
      char d[16];
      [[maybe_unused]] ssize_t n = read(wake_[0], d, sizeof d);
    }
    if (cut_) {
      cut_count_ = drop_all();
      blackhole_ = false;
      deaf_ = false;
      cut_ = false;
      continue;
    }
    if (pf[0].revents & POLLIN) {
      int down = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      int up = down >= 0 ? connect_to(target_) : -1;
      if (up >= 0) {
        pairs.emplace_back(down, up);
      } else if (down >= 0) {
        close(down);
      }
      continue;
    }
    for (std::size_t i = 0; i < pairs.size(); i++) {
      for (int side = 0; side < 2; side++) {
        if (!(pf[2 + 2 * i + side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int from = side == 0 ? pairs[i].first : pairs[i].second;
        int to = side == 0 ? pairs[i].second : pairs[i].first;
        char buf[65536];
        ssize_t n = read(from, buf, sizeof buf);
        bool ok = n > 0;
        if (side == 0 && blackhole_) continue;  // the client's bytes go nowhere
        if (side == 1 && deaf_) continue;       // the server's bytes go nowhere
        for (ssize_t off = 0; ok && off < n;) {
          ssize_t w = send(to, buf + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
          ok = w > 0;
          off += w;
        }
        if (!ok) {
          close(pairs[i].first);
          close(pairs[i].second);
          pairs.erase(pairs.begin() + static_cast<std::ptrdiff_t>(i));
          goto next;  // the poll set no longer matches pairs
        }
      }
    }
  next:;
  }
  drop_all();
}

}  // namespace testkit
