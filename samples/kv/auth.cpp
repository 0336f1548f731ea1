// samples/kv/auth.cpp — AUTH and HELLO with Redis 7.0's replies: the default user's password
// (--requirepass), and the choice of RESP2 or RESP3.
#include <uring/resp/parser.hpp>

#include "commands.hpp"
#include "connection.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;

constexpr std::string_view wrongpass = "WRONGPASS invalid username-password pair or user is disabled.";

// Compares without stopping at the first difference: the time tells the length, not the content.
bool same_secret(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Authenticates as `user` with `pass`, as Redis's default user: any password when none is configured.
// On failure the WRONGPASS error is replied; past max_auth_failures the connection closes after it.
bool authenticate(context& c, std::string_view user, std::string_view pass) {
  if (user == "default" && (c.srv.password.empty() || same_secret(pass, c.srv.password))) {
    c.ses.authenticated = true;
    return true;
  }
  resp::append_error(text(c), wrongpass);
  if (++c.ses.auth_failures >= max_auth_failures) {
    note(event::auth,
         "a client failed AUTH " + std::to_string(max_auth_failures) + " times; connection closed");
    c.close = true;
  }
  return false;
}

bool valid_name(std::string_view name) {
  for (char ch : name) {
    if (ch < '!' || ch > '~') return false;
  }
  return name.size() <= max_client_name;
}

}  // namespace

bool allowed_before_auth(const server& srv, const session& ses, std::string_view command) noexcept {
  return ses.authenticated || srv.password.empty() || command == "AUTH" || command == "HELLO" ||
         command == "QUIT";
}

// AUTH password | AUTH username password
void cmd_auth(context& c) {
  if (c.args.size() > 3) return resp::append_error(text(c), syntax_error);
  if (c.args.size() == 2 && c.srv.password.empty()) {
    return resp::append_error(text(c),
                              "ERR AUTH <password> called without any password configured for the default "
                              "user. Are you sure your configuration is correct?");
  }
  bool ok =
      c.args.size() == 2 ? authenticate(c, "default", c.args[1]) : authenticate(c, c.args[1], c.args[2]);
  if (ok) resp::append_simple_string(text(c), "OK");
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
void cmd_hello(context& c) {
  args_t a = c.args;
  int proto = 0;
  std::size_t next = 1;
  if (a.size() >= 2) {
    auto v = parse_int(a[next++]);
    if (!v) return resp::append_error(text(c), "ERR Protocol version is not an integer or out of range");
    if (*v < 2 || *v > 3) return resp::append_error(text(c), "NOPROTO unsupported protocol version");
    proto = static_cast<int>(*v);
  }
  std::optional<std::pair<std::string_view, std::string_view>> auth;
  for (std::size_t j = next; j < a.size(); ++j) {
    std::size_t more = a.size() - 1 - j;
    if (iequals(a[j], "AUTH") && more >= 2) {
      auth.emplace(a[j + 1], a[j + 2]);
      j += 2;
    } else if (iequals(a[j], "SETNAME") && more >= 1) {
      std::string_view name = a[++j];
      if (!valid_name(name)) {
        return resp::append_error(text(c), name.size() > max_client_name
                                               ? "ERR Client names are limited to " +
                                                     std::to_string(max_client_name) + " bytes in uring-kv"
                                               : "ERR Client names cannot contain spaces, newlines or "
                                                 "special characters.");
      }
      c.ses.name = name;  // at once, as Redis 7.0: an error in a later option leaves it set
    } else {
      std::string_view opt = a[j];
      return resp::append_error(
          text(c), "ERR Syntax error in HELLO option '" + std::string(opt.substr(0, opt.find('\0'))) + "'");
    }
  }
  if (auth && !authenticate(c, auth->first, auth->second)) return;
  if (!c.ses.authenticated && !c.srv.password.empty()) {
    return resp::append_error(text(c),
                              "NOAUTH HELLO must be called with the client already authenticated, otherwise "
                              "the HELLO AUTH <user> <pass> option can be used to authenticate the client "
                              "and select the RESP protocol version at the same time");
  }
  if (proto != 0) {
    c.ses.proto = proto;
    c.out.set_resp3(proto == 3);
  }
  c.out.map_header(7);
  std::string& out = text(c);
  resp::append_bulk_string(out, "server");
  resp::append_bulk_string(out, "redis");
  resp::append_bulk_string(out, "version");
  resp::append_bulk_string(out, redis_version);
  resp::append_bulk_string(out, "proto");
  resp::append_integer(out, c.ses.proto);
  resp::append_bulk_string(out, "id");
  resp::append_integer(out, c.ses.id);
  resp::append_bulk_string(out, "mode");
  resp::append_bulk_string(out, "standalone");
  resp::append_bulk_string(out, "role");
  resp::append_bulk_string(out, "master");
  resp::append_bulk_string(out, "modules");
  resp::append_array_header(out, 0);
}

}  // namespace kv
