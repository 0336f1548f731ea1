// feed_in_pieces.hpp — feeding an incremental parser its input in pieces: shared by the protocol parser
// tests (parser_feed.hpp) and the fuzz targets (fuzz/), so needs nothing but the standard library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace uring::test {

// Feeds `input` to `parser` `chunk` bytes at a time — through prepare()/commit() when `direct`, with more
// room than each piece needs — and calls drain(parser) after each piece; stops once drain returns true
// (the parser refused the input).
template <class Parser, class Drain>
void feed_in_pieces(Parser& parser, std::string_view input, std::size_t chunk, bool direct, Drain&& drain) {
  if (input.empty()) {
    drain(parser);
    return;
  }
  for (std::size_t at = 0; at < input.size();) {
    std::string_view piece = input.substr(at, chunk);
    if (direct) {
      auto room = parser.prepare(piece.size() + 16);
      std::copy(piece.begin(), piece.end(), room.begin());
      parser.commit(piece.size());
    } else {
      parser.feed(piece);
    }
    at += piece.size();
    if (drain(parser)) return;
  }
}

}  // namespace uring::test
