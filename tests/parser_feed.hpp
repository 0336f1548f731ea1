// parser_feed.hpp — feeding an incremental parser its input in pieces, for the protocol parser tests
// (http_parser_test, resp_parser_test): the parsers share feed()/prepare()/commit() (detail::input_buffer).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>

#include "feed_in_pieces.hpp"

namespace uring::test {

inline constexpr std::size_t all_at_once = std::numeric_limits<std::size_t>::max();

// Parses `input` fed `chunk` bytes at a time with a fresh Parser(lim): drain(parser, outcome) (found by
// argument-dependent lookup in the test) collects what the parser gives after each piece and returns true
// once it refuses; outcome.left is what stays buffered at the end.
template <class Parser, class Outcome, class Limits>
Outcome parse_in_pieces(std::string_view input, std::size_t chunk, const Limits& lim, bool direct) {
  Parser parser(lim);
  Outcome out;
  feed_in_pieces(parser, input, chunk, direct, [&](Parser& p) { return drain(p, out); });
  out.left = parser.buffered();
  return out;
}

// Every split of `input` gives what parsing it at once gives: parse(input, chunk, direct) returns an
// outcome that compares with ==.
template <class Parse>
void expect_split_invariant(std::string_view input, Parse&& parse) {
  auto whole = parse(input, all_at_once, false);
  for (std::size_t chunk : {1, 2, 3, 5, 7, 13, 64}) {
    EXPECT_EQ(parse(input, chunk, false), whole) << "chunk " << chunk << " of: " << input;
  }
  EXPECT_EQ(parse(input, 1, true), whole) << "prepare/commit one byte at a time of: " << input;
}

// Calls check(file_name, contents) for each file of the corpus directory `dir` (under a SCOPED_TRACE of its
// name) and returns how many there were.
template <class Check>
int for_each_corpus_file(const char* dir, Check&& check) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string contents{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    check(name, contents);
    ++files;
  }
  return files;
}

}  // namespace uring::test
