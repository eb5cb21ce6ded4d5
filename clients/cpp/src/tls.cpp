// Conn, one connection's transport, and TlsContext: plain non-blocking
// sockets, or OpenSSL's TLS over them (built with TICKWHEEL_HAVE_TLS).
//
// TLS is non-blocking like the socket: SSL_read and SSL_write say
// WANT_READ / WANT_WRITE, which Conn turns into the poll events its owner
// waits for (read_events, write_events). The SSL's BIO is this file's own
// socket BIO, whose writes go through sock_send, which never raises SIGPIPE
// (OpenSSL's own would, on a connection the server closed).
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "net.hpp"

#ifdef TICKWHEEL_HAVE_TLS
#ifndef _WIN32
#include <arpa/inet.h>
#endif
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

namespace tickwheel::detail {

namespace {
ssize_t plain_read(socket_t fd, void* buf, std::size_t n, std::string& err) {
  ssize_t got = sock_recv(fd, buf, n);
  if (got >= 0) return got;
  std::error_code ec = last_error();
  if (would_block(ec)) return Conn::kAgain;
  err = ec.message();
  return Conn::kError;
}

ssize_t plain_write(socket_t fd, const void* buf, std::size_t n, std::string& err) {
  ssize_t w = sock_send(fd, buf, n);
  if (w >= 0) return w;
  std::error_code ec = last_error();
  if (would_block(ec)) return Conn::kAgain;
  err = ec.message();
  return Conn::kError;
}
}  // namespace

#ifdef TICKWHEEL_HAVE_TLS
struct Conn::Tls {
  SSL* ssl = nullptr;
  std::string addr;   ///< for messages
  bool has_cert = false;  ///< a client certificate was offered
  bool cert_requested = false;  ///< the server sent a CertificateRequest (mTLS)
  bool ticket_seen = false;     ///< the server sent a NewSessionTicket
  ~Tls() { SSL_free(ssl); }
};
#else
struct Conn::Tls {};
#endif

Conn::Conn() = default;
Conn::Conn(socket_t fd) : fd_(fd) {}
Conn::Conn(Conn&& o) noexcept { *this = std::move(o); }

Conn& Conn::operator=(Conn&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = kNoSocket;
    tls_ = std::move(o.tls_);
    err_ = std::move(o.err_);
    tls_err_ = o.tls_err_;
    read_wants_write_ = o.read_wants_write_;
    write_wants_read_ = o.write_wants_read_;
    sticky_ = o.sticky_;
  }
  return *this;
}

Conn::~Conn() { close(); }

void Conn::close() noexcept {
  tls_.reset();
  close_fd(fd_);
  fd_ = kNoSocket;
}

short Conn::read_events() const { return read_wants_write_ ? POLLOUT : POLLIN; }
short Conn::write_events() const { return write_wants_read_ ? POLLIN : POLLOUT; }

#ifdef TICKWHEEL_HAVE_TLS
namespace {

// The socket BIO: the fd is the BIO's data.
socket_t bio_fd(BIO* b) { return static_cast<socket_t>(reinterpret_cast<std::uintptr_t>(BIO_get_data(b))); }

int bio_write(BIO* b, const char* buf, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n = sock_send(bio_fd(b), buf, static_cast<std::size_t>(len));
  if (n < 0 && would_block(last_error())) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int bio_read(BIO* b, char* buf, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n = sock_recv(bio_fd(b), buf, static_cast<std::size_t>(len));
  if (n < 0 && would_block(last_error())) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

// on_message notes the handshake messages that tell awaits_verdict.
void on_message(int write_p, int, int content_type, const void* buf, std::size_t len, SSL*, void* arg) {
  if (write_p || content_type != SSL3_RT_HANDSHAKE || len == 0) return;
  auto* t = static_cast<Conn::Tls*>(arg);
  const auto type = static_cast<const unsigned char*>(buf)[0];
  if (type == SSL3_MT_CERTIFICATE_REQUEST) t->cert_requested = true;
  if (type == SSL3_MT_NEWSESSION_TICKET) t->ticket_seen = true;
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

// socket_method is made once and lives as long as the program.
BIO_METHOD* socket_method() {
  static BIO_METHOD* const m = [] {
    BIO_METHOD* b = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tickwheel socket");
    if (b) {
      BIO_meth_set_write(b, bio_write);
      BIO_meth_set_read(b, bio_read);
      BIO_meth_set_ctrl(b, bio_ctrl);
      BIO_meth_set_create(b, bio_create);
    }
    return b;
  }();
  return m;
}

// err_text drains OpenSSL's error queue of this thread into one line.
std::string err_text() {
  std::string s;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!s.empty()) s += "; ";
    s += buf;
  }
  return s;
}

// Alert reasons: OpenSSL reports an alert from the peer as reason
// SSL_AD_REASON_OFFSET + the alert's number.
constexpr int kAlertCertificateRequired = 116;  // TLS 1.3's certificate_required
bool is_alert(int reason) { return reason > SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256; }

}  // namespace

namespace {
// tls_failure records why TLS failed on a connection (after SSL_ERROR_SSL
// or SSL_ERROR_SYSCALL), in the words a user acts on: the server's
// certificate not accepted, the server refusing the client's, or requiring
// one (mTLS; TLS 1.3 reports it at the first read after the handshake).
void tls_failure(Conn::Tls& t, std::string& err, bool& tls_err, int ssl_error, bool handshake) {
  const unsigned long first = ERR_peek_error();
  const int reason = first ? ERR_GET_REASON(first) : 0;
  const std::string detail = err_text();
  const long verify = handshake ? SSL_get_verify_result(t.ssl) : X509_V_OK;
  tls_err = true;
  if (verify != X509_V_OK) {
    std::string why = X509_verify_cert_error_string(verify);
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      why += " (TlsOptions::server_name names another)";
    } else if (verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY || verify == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
               verify == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT || verify == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT) {
      why += " (TlsOptions::ca_file must hold the CA that signed the server's certificate)";
    }
    err = "TLS handshake with " + t.addr + ": the server's certificate was not accepted: " + why;
  } else if (reason == SSL_AD_REASON_OFFSET + kAlertCertificateRequired || (is_alert(reason) && !t.has_cert)) {
    err = t.addr + " requires a TLS client certificate (mTLS) and none was given (TlsOptions::cert_file and "
          "key_file: a certificate and key signed by its tls.client_ca_file): " + detail;
  } else if (is_alert(reason)) {
    err = t.addr + " refused the TLS client certificate: " + detail;
  } else if (ssl_error == SSL_ERROR_SYSCALL && detail.empty()) {
    tls_err = false;  // the network's
    const std::error_code ec = last_error();
    err = t.addr + ": " + (ec.value() != 0 ? ec.message() : "connection closed during the TLS handshake");
  } else {
    err = "TLS with " + t.addr + ": " + (detail.empty() ? "error " + std::to_string(ssl_error) : detail);
  }
}
}  // namespace

ssize_t Conn::read(void* buf, std::size_t n) {
  if (!tls_) return plain_read(fd_, buf, n, err_);
  if (sticky_ <= 0) return sticky_;
  // Read record after record until the socket has no whole one left or buf
  // is full: poll does not see what OpenSSL already took off the socket.
  std::size_t total = 0;
  read_wants_write_ = false;
  while (total < n) {
    ERR_clear_error();
    std::size_t got = 0;
    int rc = SSL_read_ex(tls_->ssl, static_cast<char*>(buf) + total, n - total, &got);
    if (rc == 1) {
      total += got;
      continue;
    }
    int e = SSL_get_error(tls_->ssl, rc);
    if (e == SSL_ERROR_WANT_READ) break;
    if (e == SSL_ERROR_WANT_WRITE) {
      read_wants_write_ = true;
      break;
    }
    ssize_t end = 0;  // close_notify, or a close without it (SSL_OP_IGNORE_UNEXPECTED_EOF)
    if (e != SSL_ERROR_ZERO_RETURN) {
      tls_failure(*tls_, err_, tls_err_, e, false);
      end = kError;
    }
    if (total == 0) return end;
    sticky_ = end;  // the bytes read first, then the end
    break;
  }
  return total > 0 ? static_cast<ssize_t>(total) : kAgain;
}

ssize_t Conn::write(const void* buf, std::size_t n) {
  if (!tls_) return plain_write(fd_, buf, n, err_);
  write_wants_read_ = false;
  ERR_clear_error();
  std::size_t w = 0;
  int rc = SSL_write_ex(tls_->ssl, buf, n, &w);
  if (rc == 1) return static_cast<ssize_t>(w);
  int e = SSL_get_error(tls_->ssl, rc);
  if (e == SSL_ERROR_WANT_WRITE) return kAgain;
  if (e == SSL_ERROR_WANT_READ) {
    write_wants_read_ = true;
    return kAgain;
  }
  tls_failure(*tls_, err_, tls_err_, e, false);
  return kError;
}

bool Conn::buffered() const { return tls_ && SSL_pending(tls_->ssl) > 0; }

bool Conn::awaits_verdict() const {
  return tls_ && tls_->cert_requested && !tls_->ticket_seen && SSL_version(tls_->ssl) == TLS1_3_VERSION;
}

Result<std::shared_ptr<TlsContext>> TlsContext::make(const TlsOptions& o) {
  auto fail = [](const std::string& why) -> Error {
    return Error{make_error_code(errc::tls_failed), why, ""};
  };
  if (o.cert_file.empty() != o.key_file.empty()) {
    return fail(o.cert_file.empty() ? "a TLS client key needs its certificate file too (TlsOptions::cert_file)"
                                    : "a TLS client certificate needs its key file too (TlsOptions::key_file)");
  }
  if (!socket_method()) return fail("TLS: cannot make a socket BIO: " + err_text());
  std::shared_ptr<TlsContext> t(new TlsContext());
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) return fail("TLS: " + err_text());
  t->ctx_ = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);  // a server's close without close_notify is a close
  if (o.ca_file.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) return fail("TLS: the system's CA certificates: " + err_text());
  } else if (SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
    return fail("TLS CA file " + o.ca_file + ": " + err_text());
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) {
      return fail("TLS client certificate " + o.cert_file + ": " + err_text());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      if (ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
        return fail("TLS client key " + o.key_file + ": " + err_text());
      }
      return fail("TLS client certificate " + o.cert_file + " and key " + o.key_file + " do not match: " + err_text());
    }
    t->has_cert_ = true;
  }
  t->server_name_ = o.server_name;
  return t;
}

TlsContext::~TlsContext() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

bool TlsContext::handshake(Conn& c, const std::string& addr, const std::string& host,
                           std::chrono::steady_clock::time_point deadline) const {
  c.tls_ = std::make_unique<Conn::Tls>();
  c.tls_->addr = addr;
  c.tls_->has_cert = has_cert_;
  ERR_clear_error();
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(ctx_));
  BIO* bio = ssl ? BIO_new(socket_method()) : nullptr;
  if (!bio) {
    SSL_free(ssl);
    c.tls_.reset();
    c.err_ = "TLS with " + addr + ": " + err_text();
    c.tls_err_ = true;
    return false;
  }
  c.tls_->ssl = ssl;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<std::uintptr_t>(c.fd_)));
  SSL_set_bio(ssl, bio, bio);
  SSL_set_msg_callback(ssl, on_message);
  SSL_set_msg_callback_arg(ssl, c.tls_.get());
  const std::string name = server_name_.empty() ? host : server_name_;
  unsigned char ip[16];
  const bool is_ip = inet_pton(AF_INET, name.c_str(), ip) == 1 || inet_pton(AF_INET6, name.c_str(), ip) == 1;
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
  } else {
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set1_host(ssl, name.c_str());
    SSL_set_tlsext_host_name(ssl, name.c_str());
  }
  while (true) {
    ERR_clear_error();
    int rc = SSL_connect(ssl);
    if (rc == 1) return true;
    int e = SSL_get_error(ssl, rc);
    short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev == 0) {
      tls_failure(*c.tls_, c.err_, c.tls_err_, e, true);
      return false;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{c.fd_, ev, 0};
    if (left <= 0 || poll_sockets(&p, 1, static_cast<int>(left)) <= 0) {
      c.err_ = "TLS handshake with " + addr + ": no reply in time";
      c.tls_err_ = true;
      return false;
    }
  }
}

bool tls_built() { return true; }

#else  // without TLS

ssize_t Conn::read(void* buf, std::size_t n) { return plain_read(fd_, buf, n, err_); }
ssize_t Conn::write(const void* buf, std::size_t n) { return plain_write(fd_, buf, n, err_); }
bool Conn::buffered() const { return false; }
bool Conn::awaits_verdict() const { return false; }

Result<std::shared_ptr<TlsContext>> TlsContext::make(const TlsOptions&) {
  return Error{make_error_code(errc::tls_failed),
               "TLS: this tickwheel library was built without TLS (TICKWHEEL_TLS=OFF)", ""};
}

TlsContext::~TlsContext() = default;

bool TlsContext::handshake(Conn& c, const std::string&, const std::string&, std::chrono::steady_clock::time_point) const {
  c.err_ = "TLS: built without TLS";
  c.tls_err_ = true;
  return false;
}

bool tls_built() { return false; }

#endif

}  // namespace tickwheel::detail
