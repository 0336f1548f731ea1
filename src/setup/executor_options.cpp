// executor_options.cpp — names of options, for printing and for the URING_* environment variables.
#include "uring/executor_options.hpp"

#include <stdexcept>
#include <utility>

#include "setup/text.hpp"

namespace uring {

namespace {

constexpr std::pair<feature, const char*> kFeatureNames[] = {
    {feature::registered_ring, "registered_ring"},
    {feature::msg_ring, "msg_ring"},
    {feature::send_msg_ring, "send_msg_ring"},
    {feature::submit_all, "submit_all"},
    {feature::coop_taskrun, "coop_taskrun"},
    {feature::single_issuer, "single_issuer"},
    {feature::defer_taskrun, "defer_taskrun"},
    {feature::eventfd, "eventfd"},
    {feature::buf_ring, "buf_ring"},
    {feature::multishot, "multishot"},
    {feature::send_zc, "send_zc"},
    {feature::napi, "napi"},
    {feature::read_multishot, "read_multishot"},
    {feature::sqpoll, "sqpoll"},
    {feature::recv_bundle, "recv_bundle"},
    {feature::recv_incremental, "recv_incremental"},
    {feature::send_bundle, "send_bundle"},
};

}  // namespace

std::string to_string(ring_flags f) {
  static constexpr std::pair<ring_flags, const char*> kNames[] = {
      {ring_flags::submit_all, "SUBMIT_ALL"},
      {ring_flags::coop_taskrun, "COOP_TASKRUN"},
      {ring_flags::single_issuer, "SINGLE_ISSUER"},
      {ring_flags::defer_taskrun, "DEFER_TASKRUN"},
  };
  std::string out;
  for (auto [flag, name] : kNames) {
    if (!any(f & flag)) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out.empty() ? "none" : out;
}

std::string to_string(const op_allowlist& list) {
  if (!list.restricts()) return "unrestricted";
  std::string out;
  for (std::size_t k = 0; k < detail::kOpCodeCount; ++k) {
    if (!list.allows(op_kind(k))) continue;
    if (!out.empty()) out += ',';
    out += to_string(op_kind(k));
  }
  if (list.allows_msg_ring()) out += out.empty() ? "msg_ring" : ",msg_ring";
  return out;
}

std::string to_string(backend_kind k) {
  switch (k) {
    case backend_kind::automatic:
      return "auto";
    case backend_kind::native:
      return "native";
    case backend_kind::emulated:
      return "emulated";
  }
  return "?";
}

feature_set parse_feature_set(const std::string& comma_list) {
  feature_set out;
  std::size_t pos = 0;
  while (pos <= comma_list.size()) {
    std::size_t end = comma_list.find(',', pos);
    if (end == std::string::npos) end = comma_list.size();
    std::string name = detail::trim(comma_list.substr(pos, end - pos));
    pos = end + 1;
    if (name.empty() || name == "none") continue;  // "none" is what to_string prints for the empty set
    bool known = false;
    for (auto [f, n] : kFeatureNames) {
      if (name == n) {
        out = out | f;
        known = true;
      }
    }
    if (!known)
      throw std::invalid_argument("unknown feature '" + name + "' (see uring/executor_options.hpp)");
  }
  return out;
}

std::string to_string(feature_set s) {
  std::string out;
  for (auto [f, n] : kFeatureNames) {
    if (!s.contains(f)) continue;
    if (!out.empty()) out += ',';
    out += n;
  }
  return out.empty() ? "none" : out;
}

}  // namespace uring
