// The RESP2 command parser and reply encoders (uring/resp/parser.hpp). The rules are listed there.
//
// A multibulk command is parsed as its bytes arrive: pos_ remembers how far the command is read and spans_
// which arguments are complete, as offsets (feed() may move the buffer), so a command fed one byte at a
// time costs one pass, not one per feed. The argument views are made when the command is complete.
// A large bulk string leaves the buffer as soon as its length is read: its bytes go into a string of its
// own, so the buffer holds only the command's small parts and the bytes of one read.
#include <uring/resp/parser.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>

namespace uring::resp {

namespace {

constexpr std::string_view crlf = "\r\n";
// The longest "*<count>" or "$<length>" line, CRLF included, before the input is refused (Redis refuses
// what cannot be a count at all; 32 bytes is far beyond any 64-bit number).
constexpr std::size_t max_count_line = 32;
// The most argument slots a "*<count>" line reserves ahead (16 bytes each); a longer command grows its
// vector as its arguments arrive.
constexpr std::size_t max_reserved_args = 64;

// A RESP integer: an optional '-' and decimal digits, nothing else, fitting in 64 bits.
std::optional<std::int64_t> parse_integer(std::string_view s) noexcept {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

enum class line_result : std::uint8_t { found, need_more, too_long, malformed };

// The "*<n>" / "$<n>" line starting at `start` (its marker byte): its digits in `digits` and the offset
// just past its CRLF in `end`. A LF before the CR, or a CR not followed by LF, is malformed at once: no
// later byte can make the line a number, so the connection is not held open waiting for one.
line_result count_line(std::string_view in, std::size_t start, std::string_view& digits, std::size_t& end) {
  std::size_t limit = std::min(in.size(), start + max_count_line);
  std::string_view window = in.substr(0, limit);
  std::size_t cr = window.find_first_of(crlf, start + 1);
  if (cr == std::string_view::npos)
    return limit - start == max_count_line ? line_result::too_long : line_result::need_more;
  if (window[cr] == '\n') return line_result::malformed;
  if (cr + 1 == in.size()) return line_result::need_more;
  if (in[cr + 1] != '\n') return line_result::malformed;
  digits = in.substr(start + 1, cr - start - 1);
  end = cr + crlf.size();
  return line_result::found;
}

void append_number(std::string& out, std::int64_t n) {
  std::array<char, 24> text{};
  auto [end, ec] = std::to_chars(text.data(), text.data() + text.size(), n);
  out.append(text.data(), end);
}

// The byte as it can appear in a one-line error reply: itself when printable ASCII, else "\xHH" (a CR or
// LF from the input would end the reply line early and desynchronise the client).
std::string printable(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) return std::string(1, c);
  constexpr std::string_view digits = "0123456789abcdef";
  return {'\\', 'x', digits[u >> 4], digits[u & 0xF]};
}

// `s` with CR and LF replaced by spaces: what a one-line reply can carry.
void append_line_text(std::string& out, std::string_view s) {
  std::size_t from = out.size();
  out.append(s);
  for (std::size_t i = from; i < out.size(); ++i) {
    if (out[i] == '\r' || out[i] == '\n') out[i] = ' ';
  }
}

}  // namespace

void command_parser::feed(std::string_view bytes) {
  // While a large bulk string waits for its bytes, the buffer ends where they start.
  if (big_left_ > 0 && !closed() && unread().size() == pos_) bytes.remove_prefix(fill_big(bytes));
  input_buffer::feed(bytes);
}

std::size_t command_parser::fill_big(std::string_view bytes) {
  std::size_t n = std::min(big_left_, bytes.size());
  owned_.back().append(bytes.substr(0, n));
  owned_bytes_ += n;
  big_left_ -= n;
  return n;
}

std::optional<std::string> command_parser::take(std::string_view arg) noexcept {
  for (std::size_t i = 0; i < handed_bytes_.size(); ++i) {
    if (handed_bytes_[i].data() != arg.data() || handed_bytes_[i].size() != arg.size()) continue;
    if (handed_[i].data() != arg.data()) return std::nullopt;  // taken already
    return std::move(handed_[i]);
  }
  return std::nullopt;
}

parse_status command_parser::fail(std::string_view why) {
  error_ = "-ERR Protocol error: ";
  error_.append(why).append(crlf);
  args_.clear();
  spans_.clear();
  owned_.clear();
  handed_.clear();
  handed_bytes_.clear();
  owned_bytes_ = big_left_ = 0;
  big_pending_ = false;
  close();  // nothing more will be parsed: the connection is closing
  return parse_status::error;
}

parse_status command_parser::next() {
  if (closed()) return parse_status::error;
  drop_handed_out();
  args_.clear();
  handed_.clear();
  handed_bytes_.clear();
  for (;;) {
    std::string_view in = unread();
    if (in.empty()) return parse_status::need_more;
    parse_status st = in.front() == '*' ? parse_multibulk() : parse_inline();
    if (st != parse_status::command || !args_.empty()) return st;
    // An empty command ("*0\r\n", a blank line): complete() dropped its bytes; parse on.
  }
}

parse_status command_parser::parse_multibulk() {
  std::string_view in = unread();
  if (expected_ < 0) {
    std::string_view digits;
    std::size_t end = 0;
    switch (count_line(in, 0, digits, end)) {
      case line_result::need_more:
        return parse_status::need_more;
      case line_result::too_long:
        return fail("too big mbulk count string");
      case line_result::malformed:
        return fail("invalid multibulk length");
      case line_result::found:
        break;
    }
    auto count = parse_integer(digits);
    if (!count || *count > static_cast<std::int64_t>(limits_.max_args))
      return fail("invalid multibulk length");
    if (*count <= 0) return complete(end);
    expected_ = *count;
    pos_ = end;
    // Room for the arguments in one allocation rather than by doubling; bounded, as the count is only the
    // client's word until the arguments arrive.
    spans_.reserve(std::min<std::size_t>(static_cast<std::size_t>(*count), max_reserved_args));
  }
  while (spans_.size() < static_cast<std::size_t>(expected_)) {
    if (big_pending_) {
      // A large bulk string's bytes that reached the buffer (prepare and commit), then its CRLF.
      erase(pos_, fill_big(in.substr(pos_)));
      in = unread();
      if (big_left_ > 0) return parse_status::need_more;
      std::string_view after = in.substr(pos_, crlf.size());
      if (after != crlf.substr(0, after.size())) return fail("expected CRLF after bulk string");
      if (after.size() < crlf.size()) return parse_status::need_more;
      spans_.emplace_back(owned_mark | (owned_.size() - 1), owned_.back().size());
      pos_ += crlf.size();
      big_pending_ = false;
      continue;
    }
    if (pos_ >= in.size()) return parse_status::need_more;
    if (in[pos_] != '$') {
      return fail("expected '$', got '" + printable(in[pos_]) + "'");
    }
    std::string_view digits;
    std::size_t data = 0;
    switch (count_line(in, pos_, digits, data)) {
      case line_result::need_more:
        return parse_status::need_more;
      case line_result::too_long:
        return fail("too big bulk count string");
      case line_result::malformed:
        return fail("invalid bulk length");
      case line_result::found:
        break;
    }
    auto length = parse_integer(digits);
    if (!length || *length < 0 || static_cast<std::uint64_t>(*length) > limits_.max_bulk) {
      return fail("invalid bulk length");
    }
    auto size = static_cast<std::size_t>(*length);
    std::size_t end = data + size + crlf.size();
    if (owned_bytes_ + end > limits_.max_command) return fail("command too large");
    if (size >= limits_.own_bulk) {
      // Its own string, at its full length at once: the bytes here move into it, later ones go there.
      // Never a short string's inline storage, whose bytes would move with it (take() relies on that).
      owned_.emplace_back().reserve(std::max<std::size_t>(size, 64));
      big_left_ = size;
      big_pending_ = true;
      pos_ = data;
      continue;
    }
    // The CRLF after the data is checked byte by byte as it arrives: a wrong byte is refused at once.
    std::string_view after = in.substr(std::min(in.size(), data + size), crlf.size());
    if (after != crlf.substr(0, after.size())) return fail("expected CRLF after bulk string");
    if (in.size() < end) return parse_status::need_more;
    spans_.emplace_back(data, size);
    pos_ = end;
  }
  return complete(pos_);
}

parse_status command_parser::parse_inline() {
  std::string_view in = unread();
  std::size_t newline = in.find('\n', inline_scan_);
  if (newline == std::string_view::npos) {
    inline_scan_ = in.size();
    if (in.size() > limits_.max_inline) return fail("too big inline request");
    return parse_status::need_more;
  }
  if (newline > limits_.max_inline) return fail("too big inline request");
  std::size_t line_end = newline > 0 && in[newline - 1] == '\r' ? newline - 1 : newline;
  for (std::size_t i = 0; i < line_end;) {
    if (in[i] == ' ' || in[i] == '\t') {
      ++i;
      continue;
    }
    std::size_t word = i;
    while (i < line_end && in[i] != ' ' && in[i] != '\t') ++i;
    if (spans_.size() == limits_.max_args) return fail("too big inline request");
    spans_.emplace_back(word, i - word);
  }
  return complete(newline + 1);
}

// The command's `length` bytes are all in: make args_ from spans_ and start the next command afresh.
parse_status command_parser::complete(std::size_t length) {
  std::string_view in = unread();
  args_.clear();
  args_.reserve(spans_.size());
  for (auto [offset, size] : spans_) {
    args_.push_back((offset & owned_mark) != 0 ? std::string_view(owned_[offset & ~owned_mark])
                                               : in.substr(offset, size));
  }
  spans_.clear();
  handed_ = std::move(owned_);
  owned_.clear();
  handed_bytes_.assign(handed_.begin(), handed_.end());
  owned_bytes_ = 0;
  expected_ = -1;
  pos_ = 0;
  inline_scan_ = 0;
  if (args_.empty()) {
    consume(length);  // an empty command: nothing to hand out
  } else {
    hand_out(length);
  }
  return parse_status::command;
}

void append_simple_string(std::string& out, std::string_view s) {
  out.push_back('+');
  append_line_text(out, s);
  out.append(crlf);
}

void append_error(std::string& out, std::string_view message) {
  out.push_back('-');
  append_line_text(out, message);
  out.append(crlf);
}

void append_integer(std::string& out, std::int64_t n) {
  out.push_back(':');
  append_number(out, n);
  out.append(crlf);
}

void append_bulk_string(std::string& out, std::string_view s) {
  out.push_back('$');
  append_number(out, static_cast<std::int64_t>(s.size()));
  out.append(crlf).append(s).append(crlf);
}

void append_null_bulk(std::string& out) { out.append("$-1\r\n"); }

void append_array_header(std::string& out, std::size_t n) {
  out.push_back('*');
  append_number(out, static_cast<std::int64_t>(n));
  out.append(crlf);
}

void append_null_array(std::string& out) { out.append("*-1\r\n"); }

void append_bulk_array(std::string& out, std::span<const std::string_view> items) {
  append_array_header(out, items.size());
  for (auto item : items) append_bulk_string(out, item);
}

}  // namespace uring::resp
