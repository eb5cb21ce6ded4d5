// Reads answered not_leader against a real three-node cluster (README,
// "Running three nodes"): three tickwheel processes on loopback with
// -cluster-id, -node-id, -raft-addr and -peers. A switch passes a
// connection's hello to the leader, then its requests to a follower, which
// answers not_leader naming the leader (as a leader that stepped down
// does): the client asks the leader again, and the caller sees the
// leader's answer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "testkit.hpp"

using namespace tickwheel;

namespace {

// free_port binds port 0 on loopback and returns the port the kernel chose
// (closed again: the node binds it a moment later).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

int dial(const std::string& addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1))));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// frame reads one whole frame (header included) from fd into out.
bool frame(int fd, std::string& out) {
  out.assign(4, '\0');
  for (std::size_t got = 0; got < 4;) {
    ssize_t n = read(fd, &out[got], 4 - got);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  std::size_t len = (std::size_t(std::uint8_t(out[0])) << 24) | (std::size_t(std::uint8_t(out[1])) << 16) |
                    (std::size_t(std::uint8_t(out[2])) << 8) | std::uint8_t(out[3]);
  out.resize(4 + len);
  for (std::size_t got = 0; got < len;) {
    ssize_t n = read(fd, &out[4 + got], len - got);
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

bool send_all(int fd, const std::string& b) {
  for (std::size_t off = 0; off < b.size();) {
    ssize_t w = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += static_cast<std::size_t>(w);
  }
  return true;
}

// Switch serves one connection: its hello and the reply go to and from
// `leader`; everything after goes to a new connection to `follower`, whose
// replies come back, until either side closes.
class Switch {
 public:
  Switch(std::string leader, std::string follower) : leader_(std::move(leader)), follower_(std::move(follower)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    listen(fd_, 4);
    socklen_t len = sizeof sa;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    addr_ = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    th_ = std::thread([this] { serve(); });
  }
  ~Switch() {
    shutdown(fd_, SHUT_RDWR);
    th_.join();
    close(fd_);
  }
  const std::string& addr() const { return addr_; }
  std::atomic<bool> switched{false};

 private:
  void serve() {
    int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    int up = dial(leader_);
    std::string f;
    if (up >= 0 && frame(c, f) && send_all(up, f) && frame(up, f) && send_all(c, f)) {
      close(up);
      up = dial(follower_);
      switched = up >= 0;
      // One direction per thread: the follower answers and closes.
      std::thread back([&] {
        std::string g;
        while (frame(up, g) && send_all(c, g)) {
        }
        shutdown(c, SHUT_RDWR);
      });
      while (frame(c, f) && send_all(up, f)) {
      }
      shutdown(up, SHUT_RDWR);
      back.join();
    }
    if (up >= 0) close(up);
    close(c);
  }
  std::string leader_, follower_, addr_;
  int fd_;
  std::thread th_;
};

// names_leader asks follower (a ping on a connection of its own) and
// reports whether its not_leader reply names leader: a follower that has not
// heard from the leader yet names none.
bool names_leader(const std::string& follower, const std::string& leader) {
  int fd = dial(follower);
  if (fd < 0) return false;
  Request r;
  r.op = Op::ping;
  r.id = 1;
  std::vector<std::uint8_t> out;
  encode_request(r, out);
  std::string f;
  bool ok = send_all(fd, std::string(out.begin(), out.end())) && frame(fd, f);
  close(fd);
  if (!ok) return false;
  auto m = decode_message(reinterpret_cast<const std::uint8_t*>(f.data()) + 4, f.size() - 4);
  return m && m.value().kind == Message::error && m.value().err.code == errc::not_leader &&
         m.value().err.leader == leader;
}

// Cluster is three nodes on loopback, each with its own data directory.
struct Cluster {
  std::vector<std::unique_ptr<testkit::Server>> nodes;
  std::vector<std::string> addrs;
  std::string dir;

  bool start() {
    char tmp[] = "/tmp/tickwheel-cpp-cluster-XXXXXX";
    if (!mkdtemp(tmp)) return false;
    dir = tmp;
    std::string peers;
    std::vector<std::string> rafts;
    for (int i = 1; i <= 3; i++) {
      addrs.push_back("127.0.0.1:" + std::to_string(free_port()));
      rafts.push_back("127.0.0.1:" + std::to_string(free_port()));
      peers += (i > 1 ? "," : "") + std::string("n") + std::to_string(i) + "=" + rafts.back() + "=" + addrs.back();
    }
    for (int i = 0; i < 3; i++) {
      std::string data = dir + "/n" + std::to_string(i + 1);
      auto s = testkit::Server::start({"-cluster-id", "cpp", "-node-id", "n" + std::to_string(i + 1), "-raft-addr",
                                       rafts[i], "-peers", peers},
                                      data, addrs[i]);
      if (!s) return false;
      nodes.push_back(std::move(s));
    }
    return true;
  }
  std::string list() const { return addrs[0] + "," + addrs[1] + "," + addrs[2]; }
  ~Cluster() {
    nodes.clear();
    if (dir.empty()) return;
    [[maybe_unused]] int rc = std::system(("rm -rf '" + dir + "'").c_str());
  }
};

// leader_client connects over the whole list until a leader answers.
std::unique_ptr<Client> leader_client(const Cluster& cl) {
  auto o = testkit::options(cl.list());
  o.connect_timeout = std::chrono::milliseconds(1000);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto c = Client::connect(o);
    if (c) return std::move(c.value());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "no leader elected within 20 s";
  return nullptr;
}

}  // namespace

// Reads pipelined on a connection a follower answers not_leader: the first
// is answered not_leader, the others are lost when the follower closes;
// every one is asked again of the leader the reply named, and each caller
// sees the leader's answer (before: not_leader for the first, disconnected
// for the rest).
TEST(Cluster, ReadsAnsweredNotLeaderAreAskedOfTheLeader) {
  Cluster cl;
  ASSERT_TRUE(cl.start());
  auto lead = leader_client(cl);
  ASSERT_TRUE(lead);
  const std::string leader = lead->address();
  AddOptions o;
  o.group = 77;
  ASSERT_TRUE(lead->add(5, 1, 100, o).get());
  ASSERT_TRUE(lead->add(5, 2, 200).get());
  std::string follower = cl.addrs[0] == leader ? cl.addrs[1] : cl.addrs[0];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!names_leader(follower, leader) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(names_leader(follower, leader)) << follower << " does not name the leader " << leader;

  Switch sw(leader, follower);
  auto o2 = testkit::options(sw.addr());
  o2.request_timeout = std::chrono::seconds(30);  // a failure, not a hang
  auto c = Client::connect(o2);
  ASSERT_TRUE(c) << c.error().message;
  Client& cli = *c.value();
  EXPECT_EQ(cli.address(), sw.addr());  // the hello went to the leader, through the switch
  cli.begin_batch();
  auto get = cli.get(5, 1);
  auto page = cli.list_page(5);
  auto group = cli.list_group_page(77);
  auto stats = cli.stats();
  auto status = cli.cluster("status");
  cli.end_batch();
  auto g = get.get();
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g.value().group, 77u);
  auto p = page.get();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p.value().timers.size(), 2u);
  auto gp = group.get();
  ASSERT_TRUE(gp) << gp.error().message;
  ASSERT_EQ(gp.value().timers.size(), 1u);
  EXPECT_EQ(gp.value().timers[0].tid, 1u);
  auto st = stats.get();
  ASSERT_TRUE(st) << st.error().message;
  auto role = st.value().strings.find("role");
  ASSERT_NE(role, st.value().strings.end());
  EXPECT_EQ(role->second, "leader");  // answered by the leader
  auto cs = status.get();
  ASSERT_TRUE(cs) << cs.error().message;
  EXPECT_TRUE(sw.switched);
  EXPECT_EQ(cli.address(), leader);  // it followed the follower's not_leader
  EXPECT_EQ(cli.reconnects(), 1u);
}
