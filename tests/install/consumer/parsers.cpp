// parsers_consumer: a program built against an installed uring's protocol parsers (find_package, linking
// uring::http and uring::resp only), run by the install_consumer test. Parses one HTTP request and one
// RESP command; exits 0 when both come out as sent.
#include <cstdio>

#include <uring/http/parser.hpp>
#include <uring/resp/parser.hpp>

int main() {
  uring::http::request_parser http;
  http.feed("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  bool http_ok = http.next() == uring::http::parse_status::request && http.get().target == "/hello";

  uring::resp::command_parser resp;
  resp.feed("*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n");
  bool resp_ok =
      resp.next() == uring::resp::parse_status::command && resp.args().size() == 2 && resp.args()[1] == "hi";

  std::printf("consumer: parsers %s\n", http_ok && resp_ok ? "ok" : "FAILED");
  return http_ok && resp_ok ? 0 : 1;
}
