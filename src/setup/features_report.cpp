// setup/features_report.cpp — the kernel probe's findings and an executor's plan as a table for people
// (uring-probe) and as JSON (uring-probe --json), with the kernel's names for opcodes and features.
#include <array>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "uring/kernel_features.hpp"
#include "uring/op_allowlist.hpp"
#include "uring/plan.hpp"

namespace uring {

namespace {

// Kernel names of IORING_OP_* in value order (include/uapi/linux/io_uring.h, up to 6.18).
constexpr std::array<std::string_view, 63> kOpcodeNames = {
    "NOP",
    "READV",
    "WRITEV",
    "FSYNC",
    "READ_FIXED",
    "WRITE_FIXED",
    "POLL_ADD",
    "POLL_REMOVE",
    "SYNC_FILE_RANGE",
    "SENDMSG",
    "RECVMSG",
    "TIMEOUT",
    "TIMEOUT_REMOVE",
    "ACCEPT",
    "ASYNC_CANCEL",
    "LINK_TIMEOUT",
    "CONNECT",
    "FALLOCATE",
    "OPENAT",
    "CLOSE",
    "FILES_UPDATE",
    "STATX",
    "READ",
    "WRITE",
    "FADVISE",
    "MADVISE",
    "SEND",
    "RECV",
    "OPENAT2",
    "EPOLL_CTL",
    "SPLICE",
    "PROVIDE_BUFFERS",
    "REMOVE_BUFFERS",
    "TEE",
    "SHUTDOWN",
    "RENAMEAT",
    "UNLINKAT",
    "MKDIRAT",
    "SYMLINKAT",
    "LINKAT",
    "MSG_RING",
    "FSETXATTR",
    "SETXATTR",
    "FGETXATTR",
    "GETXATTR",
    "SOCKET",
    "URING_CMD",
    "SEND_ZC",
    "SENDMSG_ZC",
    "READ_MULTISHOT",
    "WAITID",
    "FUTEX_WAIT",
    "FUTEX_WAKE",
    "FUTEX_WAITV",
    "FIXED_FD_INSTALL",
    "FTRUNCATE",
    "BIND",
    "LISTEN",
    "RECV_ZC",
    "EPOLL_WAIT",
    "READV_FIXED",
    "WRITEV_FIXED",
    "PIPE",
};

// Kernel names of the IORING_FEAT_* bits, by bit number.
constexpr std::array<std::string_view, 18> kFeatureNames = {
    "SINGLE_MMAP", "NODROP",          "SUBMIT_STABLE",   "RW_CUR_POS",     "CUR_PERSONALITY", "FAST_POLL",
    "POLL_32BITS", "SQPOLL_NONFIXED", "EXT_ARG",         "NATIVE_WORKERS", "RSRC_TAGS",       "CQE_SKIP",
    "LINKED_FILE", "REG_REG_RING",    "RECVSEND_BUNDLE", "MIN_TIMEOUT",    "RW_ATTR",         "NO_IOWAIT",
};

}  // namespace

std::string opcode_name(unsigned opcode) {
  if (opcode < kOpcodeNames.size()) return std::string(kOpcodeNames[opcode]);
  return "op" + std::to_string(opcode);
}

std::string feature_name(unsigned bit) {
  if (bit < kFeatureNames.size()) return std::string(kFeatureNames[bit]);
  return "bit" + std::to_string(bit);
}

std::string to_string(const kernel_features& f) {
  std::string out;
  out += "kernel            " + f.kernel_release + "\n";
  if (!f.io_uring_usable) {
    out += "io_uring          unusable\n";
    out += "reason            " + f.reason + "\n";
    return out;
  }
  out += "io_uring          usable\n";
  out += "setup flags       " + to_string(f.setup_flags) + "\n";
  auto yes_no = [](bool b) { return b ? "yes\n" : "no\n"; };
  out += std::string("registered ring   ") + yes_no(f.registered_ring_fd);
  out += std::string("msg_ring          ") + yes_no(f.msg_ring);
  out += std::string("send_msg_ring     ") + yes_no(f.send_msg_ring);
  out += std::string("msg_ring flags    ") + yes_no(f.msg_ring_flags_pass);
  out += std::string("eventfd register  ") + yes_no(f.eventfd_register);
  out += std::string("buffer ring       ") + yes_no(f.buf_ring);
  out += std::string("multishot accept  ") + yes_no(f.multishot_accept);
  out += std::string("multishot recv    ") + yes_no(f.multishot_recv);
  out += std::string("send_zc           ") + yes_no(f.send_zc);
  out += std::string("multishot timeout ") + yes_no(f.multishot_timeout);
  out += std::string("read multishot    ") + yes_no(f.read_multishot);
  out += std::string("registered bufs   ") + yes_no(f.registered_buffers);
  out += std::string("send fixed buf    ") + yes_no(f.send_fixed_buf);
  out += std::string("napi              ") + yes_no(f.napi);
  out += std::string("epoll busy poll   ") + yes_no(f.epoll_busy_poll);
  out += std::string("sqpoll            ") + yes_no(f.sqpoll);
  out += std::string("recv bundle       ") + yes_no(f.recv_bundle);
  out += std::string("recv incremental  ") + yes_no(f.recv_incremental);
  out += std::string("send bundle       ") + yes_no(f.send_bundle);
  for (const auto& [feature, why] : f.reasons) out += "why not: " + feature + ": " + why + "\n";
  out += "features         ";
  for (unsigned bit = 0; bit < 32; ++bit) {
    if (f.feature_bits & (1u << bit)) {
      out += ' ';  // not " " + name: g++ 12 sees a false -Wrestrict in that
      out += feature_name(bit);
    }
  }
  out += "\nopcodes           " + std::to_string(f.opcodes.count()) + " supported\n";
  std::string line;
  for (unsigned op = 0; op < f.opcodes.size(); ++op) {
    if (!f.opcodes.test(op) && op >= kOpcodeNames.size()) continue;
    char cell[40];
    std::snprintf(cell, sizeof cell, "  %-3u %-18s %-4s", op, opcode_name(op).c_str(),
                  f.opcodes.test(op) ? "yes" : "no");
    line += cell;
    if (line.size() >= 3 * 29) {
      out += line + "\n";
      line.clear();
    }
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

namespace {

// A control character as JSON writes it: its short escape where JSON has one, else \u00XX.
std::string control_escape(unsigned char c) {
  switch (c) {
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      return escaped;
  }
}

// `s` as a JSON string literal. Bytes from 0x80 up pass through: the text we emit is UTF-8 already.
std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += control_escape(static_cast<unsigned char>(ch));
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    out += json_quote(item);
  }
  return out + "]";
}

// Builds one JSON object, member by member, in the order added. One name per value type, because an
// overloaded add(key, "text") would pick the bool overload.
class json_object {
 public:
  json_object& raw(std::string_view key, std::string_view json) {
    out_ += out_.size() > 1 ? "," : "";
    out_ += json_quote(key);
    out_ += ':';
    out_ += json;
    return *this;
  }
  json_object& boolean(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
  json_object& number(std::string_view key, long long v) { return raw(key, std::to_string(v)); }
  json_object& text(std::string_view key, std::string_view v) { return raw(key, json_quote(v)); }
  json_object& texts(std::string_view key, const std::vector<std::string>& v) {
    return raw(key, json_array(v));
  }
  [[nodiscard]] std::string str() const { return out_ + "}"; }

 private:
  std::string out_ = "{";
};

std::string reasons_object(const std::map<std::string, std::string>& reasons) {
  json_object o;
  for (const auto& [feature, why] : reasons) o.text(feature, why);
  return o.str();
}

// Each flag set in `flags` by its name, one flag at a time.
std::vector<std::string> flag_names(ring_flags flags) {
  std::vector<std::string> names;
  for (ring_flags one : {ring_flags::submit_all, ring_flags::coop_taskrun, ring_flags::single_issuer,
                         ring_flags::defer_taskrun}) {
    if (any(flags & one)) names.push_back(to_string(one));
  }
  return names;
}

}  // namespace

std::string to_json(const kernel_features& f) {
  std::vector<std::string> features, opcodes;
  for (unsigned bit = 0; bit < 32; ++bit) {
    if (f.feature_bits & (1u << bit)) features.push_back(feature_name(bit));
  }
  for (unsigned op = 0; op < f.opcodes.size(); ++op) {
    if (f.opcodes.test(op)) opcodes.push_back(opcode_name(op));
  }
  return json_object()
      .text("kernel_release", f.kernel_release)
      .boolean("io_uring_usable", f.io_uring_usable)
      .number("setup_errno", f.setup_errno)
      .text("reason", f.reason)
      .number("feature_bits", f.feature_bits)
      .texts("features", features)
      .texts("opcodes", opcodes)
      .boolean("registered_ring_fd", f.registered_ring_fd)
      .texts("setup_flags", flag_names(f.setup_flags))
      .boolean("msg_ring", f.msg_ring)
      .boolean("send_msg_ring", f.send_msg_ring)
      .boolean("msg_ring_flags_pass", f.msg_ring_flags_pass)
      .boolean("eventfd_register", f.eventfd_register)
      .boolean("buf_ring", f.buf_ring)
      .boolean("multishot_accept", f.multishot_accept)
      .boolean("multishot_recv", f.multishot_recv)
      .boolean("send_zc", f.send_zc)
      .boolean("multishot_timeout", f.multishot_timeout)
      .boolean("read_multishot", f.read_multishot)
      .boolean("registered_buffers", f.registered_buffers)
      .boolean("send_fixed_buf", f.send_fixed_buf)
      .boolean("napi", f.napi)
      .boolean("epoll_busy_poll", f.epoll_busy_poll)
      .boolean("sqpoll", f.sqpoll)
      .boolean("recv_bundle", f.recv_bundle)
      .boolean("recv_incremental", f.recv_incremental)
      .boolean("send_bundle", f.send_bundle)
      .raw("reasons", reasons_object(f.reasons))
      .str();
}

namespace {
// The allowlist as names (msg_ring last); empty when unrestricted.
std::vector<std::string> allowed_op_names(const op_allowlist& list) {
  std::vector<std::string> names;
  if (!list.restricts()) return names;
  for (std::size_t k = 0; k < detail::kOpCodeCount; ++k) {
    if (list.allows(op_kind(k))) names.emplace_back(to_string(op_kind(k)));
  }
  if (list.allows_msg_ring()) names.emplace_back("msg_ring");
  return names;
}
}  // namespace

std::string to_json(const executor_plan& plan) {
  return json_object()
      .text("backend", to_string(plan.backend))
      .texts("flags", flag_names(plan.flags))
      .boolean("register_ring_fd", plan.register_ring_fd)
      .boolean("msg_ring", plan.msg_ring)
      .boolean("send_msg_ring", plan.send_msg_ring)
      .boolean("buf_ring", plan.buf_ring)
      .boolean("linked_chains", plan.linked_chains)
      .boolean("multishot_timeout", plan.multishot_timeout)
      .boolean("read_multishot", plan.read_multishot)
      .boolean("sqpoll", plan.sqpoll)
      .boolean("recv_bundle", plan.recv_bundle)
      .boolean("recv_incremental", plan.recv_incremental)
      .boolean("send_bundle", plan.send_bundle)
      .texts("allowed_ops", allowed_op_names(plan.allowed_ops))
      .texts("notes", plan.notes)
      .str();
}

}  // namespace uring
