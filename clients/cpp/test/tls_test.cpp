// TLS and mTLS against the real server (-tls-cert, -tls-key,
// -tls-client-ca), with certificates made for the suite by `tickwheel
// certs`: calls and events over TLS, a reconnect that shakes hands again,
// and each refusal with its own clear error (errc::tls_failed).
#include <gtest/gtest.h>

#include <cstdlib>

#include "testkit.hpp"

using namespace tickwheel;

namespace {

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = testkit::make_certs();
    other_ = testkit::make_certs();  // another CA: its certificates are strangers to the server
  }
  static void TearDownTestSuite() {
    for (const auto& d : {certs_, other_}) {
      if (d.empty()) continue;
      [[maybe_unused]] int rc = std::system(("rm -rf '" + d.substr(0, d.rfind('/')) + "'").c_str());
    }
  }
  void SetUp() override {
    if (!Client::tls_available()) GTEST_SKIP() << "built with TICKWHEEL_TLS=OFF";
    ASSERT_FALSE(certs_.empty());
    ASSERT_FALSE(other_.empty());
  }
  /// server starts a frozen server with TLS, and mTLS when mtls.
  static std::unique_ptr<testkit::Server> server(bool mtls) {
    std::vector<std::string> args = {"-frozen", "-start-tick", "1000", "-tls-cert", certs_ + "/server.pem",
                                      "-tls-key", certs_ + "/server.key"};
    if (mtls) {
      args.push_back("-tls-client-ca");
      args.push_back(certs_ + "/ca.pem");
    }
    return testkit::Server::start(args);
  }
  /// options for addr with TLS: the suite's CA; dir's client certificate when dir is given.
  static Options tls_options(const std::string& addr, const std::string& cert_dir = "") {
    Options o = testkit::options(addr);
    o.tls.enabled = true;
    o.tls.ca_file = certs_ + "/ca.pem";
    if (!cert_dir.empty()) {
      o.tls.cert_file = cert_dir + "/client.pem";
      o.tls.key_file = cert_dir + "/client.key";
    }
    o.connect_timeout = std::chrono::milliseconds(3000);
    return o;
  }
  static std::string certs_, other_;
};
std::string Tls::certs_, Tls::other_;

// port_of is the port of "127.0.0.1:port".
std::string port_of(const std::string& addr) { return addr.substr(addr.rfind(':') + 1); }

}  // namespace

// Calls, a bind and its events over TLS; a pipelined batch and a list whose
// replies span many TLS records each way.
TEST_F(Tls, CallsAndEventsOverTls) {
  auto srv = server(false);
  ASSERT_TRUE(srv);
  auto c = Client::connect(tls_options(srv->addr()));
  ASSERT_TRUE(c) << c.error().message;
  Client& cl = *c.value();
  ASSERT_TRUE(cl.bind(7).get());
  AddOptions o;
  o.data.assign(200, 'x');
  std::vector<Future<std::uint64_t>> fs;
  cl.begin_batch();
  for (std::uint64_t tid = 1; tid <= 2000; tid++) fs.push_back(cl.add(7, tid, 5 + tid % 3, o));
  cl.end_batch();
  for (auto& f : fs) ASSERT_TRUE(f.get());
  auto all = cl.list(7).get();
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all.value().size(), 2000u);
  EXPECT_EQ(all.value()[1999].data, o.data);
  auto ff = cl.fast_forward(10);  // its reply follows the events, which wait for poll
  auto ev = testkit::take(cl, 2000, 10000);
  ASSERT_EQ(ev.size(), 2000u);
  EXPECT_EQ(ev[0].data, o.data);
  auto f = ff.get();
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f.value().fired, 2000u);
}

// The certificate is checked against the host dialled: localhost by name,
// 127.0.0.1 by IP (both in the server certificate), and refused for a
// server_name it is not valid for.
TEST_F(Tls, ChecksTheServerName) {
  auto srv = server(false);
  ASSERT_TRUE(srv);
  auto byname = Client::connect(tls_options("localhost:" + port_of(srv->addr())));
  ASSERT_TRUE(byname) << byname.error().message;
  EXPECT_TRUE(byname.value()->ping().get());

  Options o = tls_options(srv->addr());
  o.tls.server_name = "timers.example";
  auto c = Client::connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  EXPECT_NE(c.error().message.find("the server's certificate was not accepted"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("server_name"), std::string::npos) << c.error().message;
}

TEST_F(Tls, ServerOfAnotherCaIsRefused) {
  auto srv = server(false);
  ASSERT_TRUE(srv);
  Options o = tls_options(srv->addr());
  o.tls.ca_file = other_ + "/ca.pem";
  auto c = Client::connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  const std::string& m = c.error().message;
  EXPECT_NE(m.find("TLS handshake with " + srv->addr() + ": the server's certificate was not accepted"),
            std::string::npos) << m;
  EXPECT_NE(m.find("ca_file"), std::string::npos) << m;
}

TEST_F(Tls, MutualTls) {
  auto srv = server(true);
  ASSERT_TRUE(srv);
  auto c = Client::connect(tls_options(srv->addr(), certs_));
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(c.value()->bind(3).get());
  ASSERT_TRUE(c.value()->add(3, 1, 1).get());
  ASSERT_TRUE(c.value()->fast_forward(1).get());
  EXPECT_EQ(testkit::take(*c.value(), 1).size(), 1u);
}

TEST_F(Tls, MutualTlsWithoutACertificateIsRefusedClearly) {
  auto srv = server(true);
  ASSERT_TRUE(srv);
  auto c = Client::connect(tls_options(srv->addr()));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  EXPECT_NE(c.error().message.find(srv->addr() + " requires a TLS client certificate (mTLS) and none was given"),
            std::string::npos) << c.error().message;
}

TEST_F(Tls, MutualTlsWithACertificateOfAnotherCaIsRefused) {
  auto srv = server(true);
  ASSERT_TRUE(srv);
  auto c = Client::connect(tls_options(srv->addr(), other_));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  EXPECT_NE(c.error().message.find(srv->addr() + " refused the TLS client certificate"), std::string::npos)
      << c.error().message;
}

// A dropped TLS connection is dialled again with a new handshake; the
// receiver is bound again and its events keep coming.
TEST_F(Tls, ReconnectsWithANewHandshake) {
  auto srv = server(true);
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  // The relay's address is 127.0.0.1 too: the certificate fits.
  auto c = Client::connect(tls_options(relay.addr(), certs_));
  ASSERT_TRUE(c) << c.error().message;
  Client& cl = *c.value();
  ASSERT_TRUE(cl.bind(9).get());
  ASSERT_EQ(relay.cut(), 1);
  auto r = testkit::take(cl, 1, 5000, EventKind::reconnected);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(cl.add(9, 1, 1).get());
  ASSERT_TRUE(cl.fast_forward(1).get());
  EXPECT_EQ(testkit::take(cl, 1).size(), 1u);
  EXPECT_EQ(cl.reconnects(), 1u);
}

TEST_F(Tls, FilesAreCheckedBeforeDialling) {
  Options o = tls_options("127.0.0.1:1");
  o.tls.cert_file = certs_ + "/client.pem";
  auto c = Client::connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  EXPECT_NE(c.error().message.find("needs its key file too"), std::string::npos) << c.error().message;

  o = tls_options("127.0.0.1:1");
  o.tls.ca_file = certs_ + "/missing.pem";
  c = Client::connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  EXPECT_NE(c.error().message.find("TLS CA file " + certs_ + "/missing.pem"), std::string::npos) << c.error().message;

  o = tls_options("127.0.0.1:1", certs_);
  o.tls.key_file = other_ + "/client.key";
  c = Client::connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.code(), errc::tls_failed);
  EXPECT_NE(c.error().message.find("do not match"), std::string::npos) << c.error().message;
}
