// Socket addresses: parsing and formatting each family, and refusals that say what is wrong.
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include <uring/uring.hpp>

#include "test_util.hpp"

namespace {

using uring::net::address;

TEST(Address, ParsesAndFormatsEachFamily) {
  address v4 = address::parse("127.0.0.1:8080");
  EXPECT_EQ(v4.family(), AF_INET);
  EXPECT_EQ(v4.port(), 8080);
  EXPECT_EQ(v4.to_string(), "127.0.0.1:8080");
  EXPECT_EQ(v4.size(), sizeof(sockaddr_in));

  address v6 = address::parse("[::1]:443");
  EXPECT_EQ(v6.family(), AF_INET6);
  EXPECT_EQ(v6.port(), 443);
  EXPECT_EQ(v6.to_string(), "[::1]:443");
  EXPECT_EQ(address::ip("fe80::1", 7).to_string(), "[fe80::1]:7");
  EXPECT_EQ(address::ip("10.1.2.3", 0).with_port(99).to_string(), "10.1.2.3:99");

  address path = address::parse("unix:/tmp/some.sock");
  EXPECT_TRUE(path.is_unix());
  EXPECT_EQ(path.port(), 0);
  EXPECT_EQ(path.to_string(), "unix:/tmp/some.sock");
  address abstract = address::parse("unix:@hidden");
  EXPECT_EQ(abstract.to_string(), "unix:@hidden");
  EXPECT_NE(abstract, path);
  EXPECT_EQ(address::parse("127.0.0.1:8080"), v4);
  EXPECT_EQ(address().to_string(), "");
}

TEST(Address, RejectsBadInputSayingWhatIsWrong) {
  auto message = [](std::string_view text) -> std::string {
    try {
      (void)address::parse(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(message("127.0.0.1"),
            "address \"127.0.0.1\": missing ':port' (use host:port, [v6]:port or unix:path)");
  EXPECT_EQ(message("127.0.0.1:"), "address \"127.0.0.1:\": missing port after ':'");
  EXPECT_EQ(message("127.0.0.1:http"), "address \"127.0.0.1:http\": the port is not a number");
  EXPECT_EQ(message("127.0.0.1:70000"), "address \"127.0.0.1:70000\": the port is out of range (0-65535)");
  EXPECT_EQ(message("300.1.1.1:80"), "address \"300.1.1.1:80\": not an IPv4 address (a.b.c.d)");
  EXPECT_EQ(message("localhost:80"), "address \"localhost:80\": not an IPv4 address (a.b.c.d)");
  EXPECT_EQ(message("::1:80"), "address \"::1:80\": an IPv6 address with a port needs brackets: [addr]:port");
  EXPECT_EQ(message("[::1"), "address \"[::1\": missing ']' after an IPv6 address");
  EXPECT_EQ(message("[::1]"), "address \"[::1]\": missing ':port' after ']'");
  EXPECT_EQ(message("[zz::1]:80"), "address \"[zz::1]:80\": not an IPv6 address inside [ ]");
  EXPECT_EQ(message("unix:"), "address \"\": empty unix socket path");
  EXPECT_EQ(message("unix:" + std::string(120, 'x')).find("longer than 107 bytes") != std::string::npos,
            true);
  EXPECT_EQ(message(""), "address \"\": empty address");
  // A NUL byte would end the text for inet_pton and the kernel, which would take a prefix (found by
  // fuzz/address_fuzz): refused. In an abstract name it is just a byte, and round-trips.
  using namespace std::string_literals;
  EXPECT_EQ(message("1.2.3.4\0junk:80"s), "address \"1.2.3.4"s) << "what() ends at the NUL";
  EXPECT_NE(message("unix:/tmp/a\0b"s), "(accepted)");
  EXPECT_THROW((void)address::ip("::1\0zz"s, 80), std::invalid_argument);
  address abstract_nul = address::parse("unix:@a\0b"s);
  EXPECT_EQ(abstract_nul.to_string(), "unix:@a\0b"s);
  EXPECT_EQ(address::parse(abstract_nul.to_string()), abstract_nul);
}

}  // namespace
