// stream.cpp — tls_stream: OpenSSL over a BIO pair, its ciphertext moved by the executor's recv and send.
#include "uring/tls/stream.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "context_state.hpp"
#include "openssl_error.hpp"
#include "uring/error.hpp"
#include "uring/executor.hpp"
#include "uring/task_adapters.hpp"

namespace uring::tls {

namespace {
// One TLS record at most: 16 KiB of plaintext, up to 2 KiB of expansion (TLS 1.2's bound) and the
// 5-byte header. Each direction of the BIO pair holds this much; the socket's recv and send work in place
// in those buffers (BIO_nwrite0 / BIO_nread0), so nothing else is staged.
constexpr std::size_t kRecordMax = 16384 + 2048 + 5;
// Plaintext handed to one SSL_write: one full record.
constexpr std::size_t kPlainRecord = 16384;

enum class step { handshake, read, write, shutdown };

bool is_ip_literal(const std::string& host) {
  unsigned char out[16];
  return ::inet_pton(AF_INET, host.c_str(), out) == 1 || ::inet_pton(AF_INET6, host.c_str(), out) == 1;
}
}  // namespace

struct tls_stream::state {
  std::shared_ptr<tls_context::state> ctx;  // outlives the SSL's callbacks into it
  net::tcp_stream socket;
  SSL* ssl = nullptr;
  BIO* network = nullptr;  // our half of the pair; the SSL owns the other
  std::string host;        // the client's peer name (SSL app data: the session cache's key)
  // One read and one write may be in flight together (a handshake takes both sides). Only a read
  // receives once the handshake is done (renegotiation is refused, so a write never waits for the peer);
  // either may send, one at a time: a send in progress takes along what the other side produced meanwhile.
  bool reading = false;
  bool writing = false;
  bool flushing = false;
  std::coroutine_handle<> flush_waiter;  // a write that needs room while the read sends
  bool peer_closed = false;              // close_notify received

  state(std::shared_ptr<tls_context::state> c, net::tcp_stream s) : ctx(std::move(c)), socket(std::move(s)) {
    ssl = SSL_new(ctx->ctx);
    if (ssl == nullptr) detail::throw_tls(tls_errc::config, "tls_stream: SSL_new");
    BIO* internal = nullptr;
    if (BIO_new_bio_pair(&internal, kRecordMax, &network, kRecordMax) != 1) {
      SSL_free(ssl);
      detail::throw_tls(tls_errc::config, "tls_stream: BIO_new_bio_pair");
    }
    SSL_set_bio(ssl, internal, internal);
  }
  ~state() {
    SSL_free(ssl);
    BIO_free(network);
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  // One OpenSSL call; yields SSL_get_error's verdict and, for a read or write, the bytes it moved.
  int call(step k, void* data, std::size_t len, std::size_t& moved) {
    ERR_clear_error();
    int r = 0;
    switch (k) {
      case step::handshake:
        r = SSL_do_handshake(ssl);
        break;
      case step::read:
        r = SSL_read_ex(ssl, data, len, &moved);
        break;
      case step::write:
        r = SSL_write_ex(ssl, data, len, &moved);
        break;
      case step::shutdown:
        r = SSL_shutdown(ssl);
        if (r == 0) r = 1;  // ours is sent; the peer's is not waited for
        break;
    }
    return SSL_get_error(ssl, r);
  }

  // The text of a failed call: OpenSSL's reason and, for a certificate refused, the check's own reason.
  std::string describe(const char* what, int err, tls_errc& code) {
    std::string reason =
        detail::take_openssl_reason(err == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "unknown error");
    long verify = SSL_get_verify_result(ssl);
    if (!SSL_is_init_finished(ssl) && verify != X509_V_OK) {
      code = tls_errc::verify_failed;
      return std::string(what) + ": " + reason + ": " + X509_verify_cert_error_string(verify);
    }
    code = tls_errc::protocol;
    return std::string(what) + ": " + reason;
  }

  // Resumes once the send in progress has ended.
  struct flush_ended {
    state* st;
    [[nodiscard]] bool await_ready() const noexcept { return !st->flushing; }
    void await_suspend(std::coroutine_handle<> h) const noexcept { st->flush_waiter = h; }
    void await_resume() const noexcept {}
  };
  // Marks the send in progress; at its end (however it ends) wakes the side waiting for room, on a later
  // turn, so that it never runs inside this frame.
  class flushing_now {
   public:
    explicit flushing_now(state& st) : st_(st) { st_.flushing = true; }
    ~flushing_now() {
      st_.flushing = false;
      auto h = std::exchange(st_.flush_waiter, {});
      executor* ex = executor::current();
      if (!h || ex == nullptr) return;
      try {
        ex->post([h] { h.resume(); });
      } catch (const std::system_error&) {
        // The executor is shutting down: it frees the waiting frame with the others.
      }
    }
    flushing_now(const flushing_now&) = delete;
    flushing_now& operator=(const flushing_now&) = delete;

   private:
    state& st_;
  };

  // Sends every ciphertext byte OpenSSL has produced, straight from the pair's buffer. If the other side
  // is sending already, its loop takes these bytes too: `need_room` then waits for it to end (OpenSSL
  // asked for room in the pair), else returns at once.
  task<void> flush(const char* what, bool need_room = false) {
    if (flushing) {
      if (need_room) co_await flush_ended{this};
      co_return;
    }
    flushing_now mark(*this);
    for (;;) {
      char* p = nullptr;
      int n = BIO_nread0(network, &p);
      if (n <= 0) co_return;
      io_result r = co_await socket.write_some(const_buffer(p, static_cast<std::size_t>(n))).nothrow();
      if (!r) throw_errno(-r.res, what);
      BIO_nread(network, &p, r.res);
    }
  }

  // Receives ciphertext straight into the pair's buffer. The end of the stream here is a truncation: a
  // close_notify would have ended the read before another receive.
  task<void> fill(const char* what) {
    if (!reading) detail::throw_tls_text(tls_errc::protocol, std::string(what) + ": a write needs the peer");
    char* p = nullptr;
    int room = BIO_nwrite0(network, &p);
    if (room <= 0) detail::throw_tls_text(tls_errc::protocol, std::string(what) + ": record buffer full");
    io_result r = co_await socket.read_some(mutable_buffer(p, static_cast<std::size_t>(room))).nothrow();
    if (!r) throw_errno(-r.res, what);
    if (r.res == 0) {
      detail::throw_tls_text(tls_errc::truncated,
                             std::string(what) + ": the peer closed the connection without close_notify");
    }
    BIO_nwrite(network, &p, r.res);
  }

  // Calls OpenSSL until `k` is done, moving ciphertext between it and the socket. Yields the bytes read or
  // written (0 for a read that met close_notify).
  task<std::size_t> drive(const char* what, step k, void* data, std::size_t len) {
    for (;;) {
      std::size_t moved = 0;
      int err = call(k, data, len, moved);
      if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL) {
        tls_errc code{};
        std::string text = describe(what, err, code);
        try {
          // The alert, if the peer still listens: within a second (and no more than the call has left),
          // so that a peer that stops reading does not hold the error back.
          co_await with_timeout(flush(what), std::chrono::seconds(1));
        } catch (const std::system_error&) {
        }
        detail::throw_tls_text(code, std::move(text));
      }
      co_await flush(what);
      switch (err) {
        case SSL_ERROR_NONE:
          co_return moved;
        case SSL_ERROR_ZERO_RETURN:
          peer_closed = true;
          co_return 0;
        case SSL_ERROR_WANT_WRITE:
          co_await flush(what, true);  // a send in progress elsewhere: wait for the room it makes
          break;
        case SSL_ERROR_WANT_READ:
          co_await fill(what);
          break;
        default:
          detail::throw_tls_text(tls_errc::protocol,
                                 std::string(what) + ": unexpected SSL_get_error " + std::to_string(err));
      }
    }
  }
};

namespace {
// The sides of a stream an operation holds while it runs: a read, a write, or (a handshake) both.
class side_claim {
 public:
  side_claim(tls_stream::state& st, bool read, bool write)
      : reading_(read ? &st.reading : nullptr), writing_(write ? &st.writing : nullptr) {
    if ((read && st.reading) || (write && st.writing)) {
      reading_ = writing_ = nullptr;
      throw std::logic_error(read && write
                                 ? "tls_stream: the handshake needs the stream to itself"
                                 : "tls_stream: another read or write of the same kind is in flight");
    }
    if (reading_ != nullptr) *reading_ = true;
    if (writing_ != nullptr) *writing_ = true;
  }
  ~side_claim() {
    if (reading_ != nullptr) *reading_ = false;
    if (writing_ != nullptr) *writing_ = false;
  }
  side_claim(const side_claim&) = delete;
  side_claim& operator=(const side_claim&) = delete;

 private:
  bool* reading_;
  bool* writing_;
};

tls_stream::state& live(const std::unique_ptr<tls_stream::state>& s) {
  if (!s) throw std::logic_error("tls_stream: moved from");
  return *s;
}
}  // namespace

tls_stream::tls_stream(std::unique_ptr<state> s) noexcept : state_(std::move(s)) {}
tls_stream::tls_stream(tls_stream&&) noexcept = default;
tls_stream& tls_stream::operator=(tls_stream&&) noexcept = default;
tls_stream::~tls_stream() = default;

tls_stream tls_stream::client(const tls_context& ctx, net::tcp_stream s, std::string host) {
  if (ctx.is_server()) throw std::invalid_argument("tls_stream::client: a server context");
  auto st = std::make_unique<state>(ctx.get(), std::move(s));
  st->host = std::move(host);
  SSL* ssl = st->ssl;
  SSL_set_connect_state(ssl);
  SSL_set_app_data(ssl, &st->host);
  const bool ip = is_ip_literal(st->host);
  if (!ip && !st->host.empty() && SSL_set_tlsext_host_name(ssl, st->host.c_str()) != 1) {
    detail::throw_tls(tls_errc::config, "tls_stream: server name");
  }
  if ((SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) != 0) {
    if (st->host.empty()) {
      throw std::invalid_argument("tls_stream::client: verifying the server needs its host name");
    }
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), st->host.c_str())
                : SSL_set1_host(ssl, st->host.c_str());
    if (ok != 1) detail::throw_tls(tls_errc::config, "tls_stream: host name");
  }
  if (SSL_SESSION* session = st->ctx->session_for(st->host)) {
    SSL_set_session(ssl, session);
    SSL_SESSION_free(session);
  }
  return tls_stream(std::move(st));
}

tls_stream tls_stream::server(const tls_context& ctx, net::tcp_stream s) {
  if (!ctx.is_server()) throw std::invalid_argument("tls_stream::server: a client context");
  auto st = std::make_unique<state>(ctx.get(), std::move(s));
  SSL_set_accept_state(st->ssl);
  return tls_stream(std::move(st));
}

task<void> tls_stream::handshake() {
  state& st = live(state_);
  side_claim claim(st, true, true);
  co_await st.drive("handshake", step::handshake, nullptr, 0);
}

task<std::size_t> tls_stream::read_some(mutable_buffer buf) {
  state& st = live(state_);
  side_claim claim(st, true, !SSL_is_init_finished(st.ssl));
  if (st.peer_closed || buf.size() == 0) co_return 0;
  co_return co_await st.drive("read_some", step::read, buf.data(), buf.size());
}

task<void> tls_stream::read_exactly(mutable_buffer buf) {
  state& st = live(state_);
  side_claim claim(st, true, !SSL_is_init_finished(st.ssl));  // before the handshake, a read is one
  auto* p = static_cast<std::byte*>(buf.data());
  for (std::size_t done = 0; done < buf.size();) {
    std::size_t n =
        st.peer_closed ? 0 : co_await st.drive("read_exactly", step::read, p + done, buf.size() - done);
    if (n == 0) {
      throw std::system_error(ENODATA, std::system_category(),
                              "read_exactly: end of stream after " + std::to_string(done) + " of " +
                                  std::to_string(buf.size()) + " bytes");
    }
    done += n;
  }
}

task<void> tls_stream::write_all(const_buffer buf) {
  state& st = live(state_);
  side_claim claim(st, !SSL_is_init_finished(st.ssl), true);
  auto* p = const_cast<std::byte*>(static_cast<const std::byte*>(buf.data()));
  for (std::size_t done = 0; done < buf.size();) {
    std::size_t n =
        co_await st.drive("write_all", step::write, p + done, std::min(buf.size() - done, kPlainRecord));
    if (n == 0)
      throw std::system_error(EPIPE, std::system_category(), "write_all: the TLS session has ended");
    done += n;
  }
}

task<void> tls_stream::shutdown() {
  state& st = live(state_);
  side_claim claim(st, false, true);
  if (SSL_is_init_finished(st.ssl)) co_await st.drive("shutdown", step::shutdown, nullptr, 0);
  io_result r = co_await st.socket.shutdown(SHUT_WR).nothrow();
  if (!r && r.res != -ENOTCONN) throw_errno(-r.res, "shutdown");
}

std::string_view tls_stream::alpn() const noexcept {
  const unsigned char* data = nullptr;
  unsigned len = 0;
  if (state_) SSL_get0_alpn_selected(state_->ssl, &data, &len);
  return data == nullptr ? std::string_view() : std::string_view(reinterpret_cast<const char*>(data), len);
}

std::string_view tls_stream::server_name() const noexcept {
  const char* name = state_ ? SSL_get_servername(state_->ssl, TLSEXT_NAMETYPE_host_name) : nullptr;
  return name == nullptr ? std::string_view() : std::string_view(name);
}

bool tls_stream::resumed() const noexcept { return state_ && SSL_session_reused(state_->ssl) == 1; }

std::string_view tls_stream::version() const noexcept {
  return state_ ? std::string_view(SSL_get_version(state_->ssl)) : std::string_view();
}

std::string tls_stream::peer_subject() const {
  if (!state_) return {};
  X509* cert = SSL_get0_peer_certificate(state_->ssl);
  if (cert == nullptr) return {};
  std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new(BIO_s_mem()), &BIO_free);
  if (!out || X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) return {};
  char* text = nullptr;
  const long n = BIO_get_mem_data(out.get(), &text);
  return n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
}

net::tcp_stream& tls_stream::next_layer() noexcept { return state_->socket; }

}  // namespace uring::tls
