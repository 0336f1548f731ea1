// uring-probe: prints what the running kernel's io_uring can do, and what an executor gets from it.
//
//   uring-probe          a readable table, the plan for default executor options, the executor's outcome
//   uring-probe --json   {"kernel": {...}, "plan": {...}} on one line ("plan": null when there is none), and
//                        "ktls": {"available": ..., "reason": ...} where uring::tls is built
//
// The plan honours URING_BACKEND and URING_DISABLE, as an executor would. Exit status: 0 when the report
// was printed, 1 when no plan could be made (e.g. URING_BACKEND=native where io_uring is unusable, or a bad
// override value), 2 for a bad command line.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include <uring/uring.hpp>
#ifdef URING_WITH_TLS
#include <uring/tls/ktls.hpp>
#endif

namespace {

constexpr const char* kUsage =
    "usage: uring-probe [--json] [--help]\n"
    "  Probes the kernel's io_uring and shows the plan an executor with default options would follow.\n"
    "  --json   print {\"kernel\": ..., \"plan\": ...} as one JSON object\n"
    "  --help   print this text\n"
    "Environment: URING_BACKEND=auto|native|emulated, URING_DISABLE=msg_ring,defer_taskrun,...\n";

// The plan for default options with the environment's overrides; nullopt (and the reason in `error`) when
// there is none.
std::optional<uring::executor_plan> default_plan(const uring::kernel_features& kernel, std::string& error) {
  try {
    return uring::make_plan(kernel, uring::executor_options{}, uring::plan_overrides::from_environment());
  } catch (const std::exception& e) {
    error = e.what();
    return std::nullopt;
  }
}

// On one line, so that scripts can pipe it to jq. Without a plan, "plan" is null and stderr says why.
int print_json(const uring::kernel_features& kernel) {
  std::string error;
  std::optional<uring::executor_plan> plan = default_plan(kernel, error);
  std::string out =
      "{\"kernel\":" + uring::to_json(kernel) + ",\"plan\":" + (plan ? uring::to_json(*plan) : "null");
#ifdef URING_WITH_TLS
  out += ",\"ktls\":" + uring::tls::to_json(uring::tls::ktls_available());
#endif
  out += "}\n";
  std::fputs(out.c_str(), stdout);
  if (!plan) std::fprintf(stderr, "uring-probe: no plan: %s\n", error.c_str());
  return plan ? 0 : 1;
}

int print_table(const uring::kernel_features& kernel) {
  std::fputs(uring::to_string(kernel).c_str(), stdout);
#ifdef URING_WITH_TLS
  // kTLS (the kernel's "tls" ULP) is not an io_uring feature: uring::tls asks for it on a socket.
  const auto& ktls = uring::tls::ktls_available();
  std::printf("ktls              %s%s\n", ktls ? "available" : "unavailable: ", ktls.reason.c_str());
#endif
  std::string error;
  std::optional<uring::executor_plan> plan = default_plan(kernel, error);
  if (!plan) {
    std::printf("plan              failed: %s\n", error.c_str());
    return 1;
  }
  std::printf("plan              %s\n", uring::to_string(*plan).c_str());
  if (plan->backend != uring::backend_kind::native) return 0;
  // What a real executor ended up with (the kernel may still refuse what the plan asks for).
  try {
    uring::executor ex;
    std::printf("executor          backend %s, ring flags %s (dropped: %s), registered ring fd: %s\n",
                uring::to_string(ex.plan().backend).c_str(), uring::to_string(ex.active_flags()).c_str(),
                uring::to_string(ex.dropped_flags()).c_str(), ex.registered_ring() ? "yes" : "no");
    // What the executor's plan says beyond the one above (a fallback its own ring's setup made, and why).
    for (const auto& note : ex.plan().notes) {
      if (std::find(plan->notes.begin(), plan->notes.end(), note) == plan->notes.end())
        std::printf("  - %s\n", note.c_str());
    }
  } catch (const std::exception& e) {
    std::printf("executor          failed: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "uring-probe: unknown argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  uring::kernel_features kernel = uring::probe_kernel();
  return json ? print_json(kernel) : print_table(kernel);
}
