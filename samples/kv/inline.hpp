// samples/kv/inline.hpp — inline commands read as Redis reads them: quotes and escapes, as sdssplitargs.
//
// Provides: kv::inline_words (the line behind an inline command the RESP parser split on blanks) and
// kv::split_inline. Pure functions.
//
// The RESP parser (uring::resp) splits an inline line on spaces and tabs only; its words are views into
// the line, so the line is recovered from the first word to the end of the last and split again here.
// A command is known to be inline when its first two words are separated by blanks alone (a multibulk
// command's are separated by "\r\n$<len>\r\n"); a one-word inline command is taken as it is (a lone
// quoted word, "\"PING\"", is not unquoted as Redis would).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shard.hpp"

namespace kv {

// The line of an inline command of two words or more, or nullopt for a multibulk (or one-word) command.
std::optional<std::string_view> inline_line(args_t args) noexcept;

// The words of `line` as Redis's sdssplitargs makes them: blanks separate; "double quotes" take \n \r \t
// \b \a \xHH and \<any> escapes, 'single quotes' take \'; a closing quote must be followed by a blank or
// the end; a NUL byte ends the line. nullopt for unbalanced quotes.
std::optional<std::vector<std::string>> split_inline(std::string_view line);

}  // namespace kv
