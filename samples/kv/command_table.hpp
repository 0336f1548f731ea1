// samples/kv/command_table.hpp — what COMMAND answers of each command uring-kv implements, as Redis 7.0 does.
//
// Provides: kv::command_entry, kv::command_table (command_table.cpp, written by gen_command_table.py from
// redis-server), kv::command_help, kv::append_resp3 (an entry's bytes in the client's protocol) and
// kv::find_command.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kv {

// Where a command's keys are (Redis's key specs, begin_search index and find_keys range: the only kinds
// uring-kv's commands have).
struct key_spec {
  int index;               // the first key's argument
  int lastkey;             // the last key, from the first (>= 0) or from the end (< 0)
  int keystep;             // arguments from one key to the next
  int limit;               // with lastkey -1: a part of the remaining arguments
  std::string_view flags;  // RESP3 set of the key's access flags (GETKEYSANDFLAGS)
};

struct command_entry {
  std::string_view name;  // Redis's full name: lower case, "container|sub" for a subcommand
  int arity;
  std::string_view acl;  // ACL categories, "@read @string ..."
  bool sub;              // a subcommand: COMMAND LIST names it, COMMAND and COUNT do not
  bool no_mandatory_keys;
  int specs_count;
  key_spec specs[2];
  std::string_view info;  // COMMAND INFO's entry, RESP3 (a container's without its subcommands': see
                          // command_info.cpp)
  std::string_view docs;  // COMMAND DOCS's entry (the value after the name), RESP3 (the same)
};

extern const std::span<const command_entry> command_table;
extern const std::string_view command_help;  // COMMAND HELP's reply, RESP3

// Appends `resp3` (whole RESP3 values) to `out`, in RESP2 unless `resp3_out`: maps become arrays of keys
// and values, sets arrays, as Redis writes them to a RESP2 client.
void append_resp3(std::string& out, std::string_view resp3, bool resp3_out);

// As Redis's lookupCommand: the entry of a container's subcommand when `words` has one (null if the container
// has no such subcommand), else of the command (null if unknown). words[0] is the name, any case.
const command_entry* find_command(std::span<const std::string_view> words);

}  // namespace kv
