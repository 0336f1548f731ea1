// samples/kv/command_info.cpp — COMMAND and its subcommands (COUNT, LIST, INFO, DOCS, GETKEYS,
// GETKEYSANDFLAGS, HELP) over command_table, with Redis 7.0's replies.
#include <uring/resp/parser.hpp>

#include "command_table.hpp"
#include "commands.hpp"

namespace kv {

namespace {

namespace resp = uring::resp;

// An entry by its full name, any case ("config|get" names a subcommand); null if uring-kv has none.
const command_entry* find_entry(std::string_view name) {
  const std::string want = lower(name);
  for (const command_entry& e : command_table) {
    if (e.name == want) return &e;
  }
  return nullptr;
}

// A container's subcommands: the entries that follow it (gen_command_table.py writes them there).
std::span<const command_entry> subcommands_of(const command_entry& e) {
  if (e.sub) return {};
  const command_entry* end = &e + 1;
  while (end != command_table.data() + command_table.size() && end->sub) ++end;
  return {&e + 1, end};
}

// A container's entry leaves out its subcommands' entries, which end its INFO (the array of their INFO
// entries) and its DOCS (the map of their DOCS): they are appended from their own rows.
void append_info(std::string& out, const command_entry& e, bool resp3) {
  append_resp3(out, e.info, resp3);
  for (const command_entry& s : subcommands_of(e)) append_resp3(out, s.info, resp3);
}

void append_docs(std::string& out, const command_entry& e, bool resp3) {
  append_resp3(out, e.docs, resp3);
  for (const command_entry& s : subcommands_of(e)) {
    resp::append_bulk_string(out, s.name);
    append_resp3(out, s.docs, resp3);
  }
}

std::size_t top_level_count() noexcept {
  std::size_t n = 0;
  for (const command_entry& e : command_table) n += e.sub ? 0 : 1;
  return n;
}

void all_info(context& c) {
  resp::append_array_header(text(c), top_level_count());
  for (const command_entry& e : command_table) {
    if (!e.sub) append_info(text(c), e, c.out.resp3());
  }
}

void command_info(context& c) {
  if (c.args.size() == 2) return all_info(c);
  resp::append_array_header(text(c), c.args.size() - 2);
  for (std::size_t i = 2; i < c.args.size(); ++i) {
    const command_entry* e = find_entry(c.args[i]);
    if (e == nullptr) {
      c.out.null();
    } else {
      append_info(text(c), *e, c.out.resp3());
    }
  }
}

void command_docs(context& c) {
  std::vector<const command_entry*> found;
  for (const command_entry& e : command_table) {
    if (c.args.size() == 2 && !e.sub) found.push_back(&e);
  }
  for (std::size_t i = 2; i < c.args.size(); ++i) {
    if (const command_entry* e = find_entry(c.args[i])) found.push_back(e);
  }
  c.out.map_header(found.size());
  for (const command_entry* e : found) {
    resp::append_bulk_string(text(c), e->name);
    append_docs(text(c), *e, c.out.resp3());
  }
}

// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: uring-kv has no modules.
void command_list(context& c) {
  bool filtered = c.args.size() == 5 && iequals(c.args[2], "FILTERBY");
  if (c.args.size() != 2 && !(filtered && (iequals(c.args[3], "MODULE") || iequals(c.args[3], "ACLCAT") ||
                                           iequals(c.args[3], "PATTERN")))) {
    return resp::append_error(text(c), "ERR syntax error");
  }
  std::string category = filtered ? "@" + lower(c.args[4]) : std::string();
  std::vector<std::string_view> names;
  for (const command_entry& e : command_table) {
    bool in = !filtered;
    if (filtered && iequals(c.args[3], "ACLCAT")) {
      for (std::string_view acl = e.acl; !acl.empty() && !in;) {
        std::size_t space = acl.find(' ');
        in = acl.substr(0, space) == category;
        acl = space == std::string_view::npos ? std::string_view() : acl.substr(space + 1);
      }
    } else if (filtered && iequals(c.args[3], "PATTERN")) {
      in = matches(lower(c.args[4]), e.name);  // Redis matches without case
    }
    if (in) names.push_back(e.name);
  }
  resp::append_array_header(text(c), names.size());
  for (std::string_view n : names) resp::append_bulk_string(text(c), n);
}

// The arguments of `words` that are keys, by the command's key specs (Redis's getKeysUsingKeySpecs for
// index and range specs); their spec's index alongside. Empty: none, or the arguments do not fit the specs.
std::vector<std::pair<std::size_t, int>> keys_of(const command_entry& e, args_t words) {
  std::vector<std::pair<std::size_t, int>> keys;
  auto argc = static_cast<int>(words.size());
  for (int s = 0; s < e.specs_count; ++s) {
    const key_spec& spec = e.specs[s];
    int first = spec.index, last = 0;
    if (spec.lastkey >= 0) {
      last = first + spec.lastkey;
    } else if (spec.limit == 0) {
      last = argc + spec.lastkey;
    } else {
      last = first + ((argc - first) / spec.limit + spec.lastkey);
    }
    if (first >= argc || last >= argc || last < first) return {};
    for (int i = first; i <= last; i += spec.keystep) keys.emplace_back(static_cast<std::size_t>(i), s);
  }
  return keys;
}

// SET's key flags depend on GET (Redis's setGetKeys): read and written with it, overwritten without.
std::string_view variable_flags(const command_entry& e, args_t words) {
  for (std::size_t i = 3; i < words.size(); ++i) {
    if (e.name == "set" && iequals(words[i], "GET")) return "~3\r\n+RW\r\n+access\r\n+update\r\n";
  }
  return "~2\r\n+OW\r\n+update\r\n";
}

void command_getkeys(context& c, bool with_flags) {
  args_t words = c.args.subspan(2);
  const command_entry* e = find_command(words);
  if (e == nullptr) return resp::append_error(text(c), "ERR Invalid command specified");
  if (e->specs_count == 0) return resp::append_error(text(c), "ERR The command has no key arguments");
  if (!arity_fits(e->arity, words.size())) {
    return resp::append_error(text(c), "ERR Invalid number of arguments specified for command");
  }
  auto keys = keys_of(*e, words);
  if (keys.empty() && !e->no_mandatory_keys) {
    return resp::append_error(text(c), "ERR Invalid arguments specified for command");
  }
  resp::append_array_header(text(c), keys.size());
  for (auto [at, spec] : keys) {
    if (with_flags) resp::append_array_header(text(c), 2);
    resp::append_bulk_string(text(c), words[at]);
    if (!with_flags) continue;
    std::string_view flags = e->specs[spec].flags;
    if (flags.find("+variable_flags\r\n") != std::string_view::npos) flags = variable_flags(*e, words);
    append_resp3(text(c), flags, c.out.resp3());
  }
}

// Their arity is the command table's, which execute checks first.
struct subcommand {
  std::string_view name;  // upper case
  void (*run)(context&);
};
constexpr subcommand subcommands[] = {
    {"COUNT",
     [](context& c) { resp::append_integer(text(c), static_cast<std::int64_t>(top_level_count())); }},
    {"LIST", command_list},
    {"INFO", command_info},
    {"DOCS", command_docs},
    {"GETKEYS", [](context& c) { command_getkeys(c, false); }},
    {"GETKEYSANDFLAGS", [](context& c) { command_getkeys(c, true); }},
    {"HELP", [](context& c) { append_resp3(text(c), command_help, c.out.resp3()); }},
};

}  // namespace

// As Redis's lookupCommand (for GETKEYS, and before a command runs or is queued).
const command_entry* find_command(args_t words) {
  const command_entry* base = find_entry(words[0]);
  if (base == nullptr || words.size() == 1) return base;
  std::string sub = std::string(base->name) + "|";
  for (const command_entry& e : command_table) {
    if (e.sub && e.name.starts_with(sub)) return find_entry(sub + lower(words[1]));
  }
  return base;
}

void append_resp3(std::string& out, std::string_view resp3, bool resp3_out) {
  if (resp3_out) {
    out += resp3;
    return;
  }
  // Line by line: a header or a simple value per line, a bulk string's bytes skipped whole.
  for (std::size_t at = 0; at < resp3.size();) {
    std::size_t end = resp3.find("\r\n", at);
    char kind = resp3[at];
    std::string_view body = resp3.substr(at + 1, end - at - 1);
    std::int64_t n = kind == '$' || kind == '%' ? parse_int(body).value_or(-1) : 0;
    if (kind == '%') {
      resp::append_array_header(out, static_cast<std::size_t>(2 * n));
    } else if (kind == '~') {
      out.append("*").append(body).append("\r\n");
    } else {
      if (n > 0) end += 2 + static_cast<std::size_t>(n);
      out.append(resp3.substr(at, end + 2 - at));
    }
    at = end + 2;
  }
}

std::size_t command_count() noexcept { return top_level_count(); }

// COMMAND alone: every entry. redis-cli asks for COMMAND DOCS at start (its hints).
void cmd_command(context& c) {
  if (c.args.size() == 1) return all_info(c);
  for (const subcommand& s : subcommands) {
    if (!iequals(c.args[1], s.name)) continue;
    if (c.ses.exec_count < 0) c.ses.info.sub = s.name;
    return s.run(c);
  }
  resp::append_error(
      text(c), "ERR unknown subcommand '" + std::string(c.args[1].substr(0, 128)) + "'. Try COMMAND HELP.");
}

}  // namespace kv
