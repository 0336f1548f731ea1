/// @file
/// uring/resp/parser.hpp — an incremental RESP2 (Redis protocol) command parser and reply encoders.
///
/// Provides: uring::resp::command_parser (bytes in, commands out as argument lists), limits, parse_status;
/// append_simple_string / append_error / append_integer / append_bulk_string / append_null_bulk /
/// append_array_header / append_null_array / append_bulk_array. Library target uring::resp (no I/O, no
/// executor: a server feeds it what it reads).
/// Threads: plain values; a parser is used by one thread at a time (one parser per connection).
///
/// Use:
///   uring::resp::command_parser p;                  // one per connection
///   p.feed(bytes_just_read);                        // any split, down to one byte at a time
///   for (;;) {
///     auto st = p.next();
///     if (st == parse_status::need_more) break;     // read more, feed again
///     if (st == parse_status::error) { send(p.error()); close(); break; }
///     execute(p.args());                            // {"SET", "k", "v"}; several may be buffered
///   }
///
/// Lifetimes: the std::string_views of args() point into the parser's own buffer and stay valid until the
/// next call to feed(), prepare(), commit() or next() on that parser. Copy what must live longer.
///
/// What a command is (client to server, as Redis reads it):
///  - Multibulk: "*<n>\r\n" then n bulk strings "$<len>\r\n<len bytes>\r\n". Bulk strings are binary-safe.
///    "*0\r\n" and "*-1\r\n" (and any n <= 0) are empty commands and are skipped. The count and length
///    lines must end in CRLF; the bytes after a bulk string's data must be CRLF.
///  - Inline: any other first byte starts a line of words separated by spaces or tabs, ended by "\n" or
///    "\r\n" ("PING\r\n", "GET key\n"), for telnet and health checks. Empty lines are skipped. Unlike Redis,
///    quotes are not interpreted: "SET k \"a b\"" is four words (binary values go in the multibulk form).
/// Refusals (parse_status::error, sticky: reply error() and close the connection, as Redis does):
///  - "*" count not an integer or above limits.max_args: "invalid multibulk length";
///  - a bulk string not starting with '$': "expected '$', got 'X'";
///  - "$" length not an integer, negative or above limits.max_bulk: "invalid bulk length";
///  - a "*" or "$" line with a LF before its CR, or a CR not followed by LF: the same two errors, as soon
///    as the byte arrives (Redis waits for a CR that a client may never send);
///  - no CRLF after a bulk string's data: "expected CRLF after bulk string", at its first wrong byte;
///  - a count or length line longer than 32 bytes: "too big mbulk count string" / "too big bulk
///    count string";
///  - an inline line of more than limits.max_inline bytes before its "\n" (a "\r" counts), or with
///    more than max_args words: "too big inline request";
///  - a multibulk command whose bytes exceed limits.max_command: "command too large".
/// Memory: the bytes fed and not yet handed out by next(), plus one argument list (<= max_args views):
/// bounded by max_command + one read for a server that drains next() until need_more after each read.
/// A bulk string of limits.own_bulk bytes or more is read into a string of its own, allocated once at
/// its announced length (pages are committed as its bytes arrive): it is never copied as the buffer
/// grows, and take() hands it to the caller without a copy, so a large value costs its size once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <uring/protocol/input_buffer.hpp>

namespace uring::resp {

/// What command_parser accepts; beyond it the command is refused. Threads: a plain value.
struct limits {
  std::size_t max_bulk = 8 * 1024 * 1024;      ///< bytes in one bulk string (Redis allows up to 512 MiB)
  std::size_t max_args = 1024;                 ///< arguments of one command
  std::size_t max_inline = 64 * 1024;          ///< bytes of one inline command line before its "\n"
  std::size_t max_command = 16 * 1024 * 1024;  ///< bytes of one multibulk command, framing included
  std::size_t own_bulk = 32 * 1024;  ///< bulk strings this long and longer get a string of their own (take())
};

/// What command_parser::next found.
enum class parse_status : std::uint8_t {
  need_more,  ///< no complete command buffered: feed more bytes
  command,    ///< args() is the next command (never empty)
  error,      ///< error() is the reply to send before closing the connection
};

/// An incremental RESP2 command parser for a server: bytes in (any split), commands out as argument lists,
/// refusals as the error reply Redis would send (the file's comment has the rules).
/// Threads: a parser is used by one thread at a time (one parser per connection).
class command_parser : private detail::input_buffer {
 public:
  /// A parser that enforces `lim`.
  explicit command_parser(limits lim = {}) noexcept : limits_(lim) {}

  /// feed(bytes), prepare(n) + commit(k), buffered(): adding bytes read from the connection, and how many
  /// are waiting (see input_buffer). Each invalidates the views of the last message handed out.
  using input_buffer::commit;
  using input_buffer::prepare;
  /// Adds bytes read from the connection: those of a large bulk string in progress go straight into its
  /// own string, the rest into the buffer.
  void feed(std::string_view bytes);
  /// Bytes fed and not yet handed out as part of a command, a large bulk string's included.
  [[nodiscard]] std::size_t buffered() const noexcept { return input_buffer::buffered() + owned_bytes_; }

  /// Parses on from where the last call stopped. Drops the previous command's bytes first, so the views of
  /// the command returned before are invalid afterwards.
  [[nodiscard]] parse_status next();

  /// The arguments of the command next() just returned parse_status::command for; args()[0] is its name.
  [[nodiscard]] std::span<const std::string_view> args() const noexcept { return args_; }
  /// The complete error reply after parse_status::error: "-ERR Protocol error: <why>\r\n".
  [[nodiscard]] std::string_view error() const noexcept { return error_; }

  /// If `arg` is an argument of the command last returned that has a string of its own (a bulk string of
  /// limits.own_bulk bytes or more), moves that string out, else empty. `arg` keeps pointing at the same
  /// bytes, now the caller's. Calls for different arguments may run on different threads at once.
  [[nodiscard]] std::optional<std::string> take(std::string_view arg) noexcept;

 private:
  parse_status fail(std::string_view why);
  parse_status parse_multibulk();
  parse_status parse_inline();
  parse_status complete(std::size_t length);
  /// Appends what `bytes` holds of the large bulk string in progress to it; returns how many bytes it took.
  std::size_t fill_big(std::string_view bytes);

  limits limits_;
  std::vector<std::string_view> args_;
  std::string error_;
  /// A multibulk command in progress, as offsets from its first byte (the buffer may move between feeds).
  std::int64_t expected_ = -1;                              ///< the "*" count; -1 before it is read
  std::size_t pos_ = 0;                                     ///< first byte not parsed yet
  std::vector<std::pair<std::size_t, std::size_t>> spans_;  ///< (offset, length) of the arguments so far
  std::size_t inline_scan_ = 0;                             ///< inline bytes already searched for '\n'
  /// Large bulk strings: those of the command in progress (a span's offset is owned_mark | index), the
  /// last one still filling while big_left_ > 0; then, once the command is handed out, the same strings
  /// with where their bytes are (take() matches on that, never on a string another thread may move).
  static constexpr std::size_t owned_mark = std::size_t{1} << 63;
  std::vector<std::string> owned_;
  std::size_t owned_bytes_ = 0;  ///< bytes in owned_ for the command in progress (out of the buffer, so
                                 ///< buffered() and max_command add them)
  std::size_t big_left_ = 0;     ///< bytes the last of owned_ still waits for
  bool big_pending_ = false;     ///< the last of owned_ is not in spans_ yet (its bytes or CRLF are due)
  std::vector<std::string> handed_;
  std::vector<std::string_view> handed_bytes_;
};

/// Reply encoders: each appends one RESP2 value to `out`.
/// "+<s>\r\n". CR and LF in `s` become spaces (a simple string cannot hold them).
void append_simple_string(std::string& out, std::string_view s);
/// "-<message>\r\n", e.g. append_error(out, "ERR unknown command"). CR and LF become spaces, as in Redis.
void append_error(std::string& out, std::string_view message);
/// ":<n>\r\n".
void append_integer(std::string& out, std::int64_t n);
/// "$<len>\r\n<s>\r\n", binary-safe.
void append_bulk_string(std::string& out, std::string_view s);
/// "$-1\r\n": the null bulk string (GET of a missing key).
void append_null_bulk(std::string& out);
/// "*<n>\r\n": the caller appends the n elements after it.
void append_array_header(std::string& out, std::size_t n);
/// "*-1\r\n": the null array.
void append_null_array(std::string& out);
/// An array of bulk strings.
void append_bulk_array(std::string& out, std::span<const std::string_view> items);

}  // namespace uring::resp
