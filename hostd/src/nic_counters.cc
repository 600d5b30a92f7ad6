#include "crux/hostd/nic_counters.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "crux/core/base/line_rate.h"
#include "crux/textio/file.h"

namespace crux::hostd {
namespace {

// sysfs reports every attribute as 4096 bytes; a counter is at most 20 digits.
constexpr size_t kMaxCounterFileBytes = 4096;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Printable, cut: for error messages.
std::string Shown(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 32; ++i) {
    const char c = s[i];
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 32) out += "...";
  return out;
}

}  // namespace

std::optional<uint64_t> ParseCounterValue(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::array<uint64_t, kNicCounterCount> NicCounterDelta(const NicCounterReading& before,
                                                       const NicCounterReading& now) {
  std::array<uint64_t, kNicCounterCount> out{};
  for (size_t i = 0; i < kNicCounterCount; ++i) {
    const std::optional<uint64_t>& b = before.values[i];
    const std::optional<uint64_t>& n = now.values[i];
    if (b && n && *n >= *b) out[i] = *n - *b;
  }
  return out;
}

NicJudgement JudgeNicCounters(const NicCounterReading& before, const NicCounterReading& now,
                              core::Duration interval) {
  constexpr core::Duration kLag = core::Duration::Millis(1000);  // Slack for the read times.
  NicJudgement out;
  for (size_t i = 0; i < kNicCounterCount; ++i) {
    const std::optional<uint64_t>& b = before.values[i];
    const std::optional<uint64_t>& n = now.values[i];
    if (b && n && *n < *b) {
      out.verdict = NicVerdict::kReset;
      out.why = std::string(kNicCounterNames[i]) + " went backwards (" + std::to_string(*b) +
                " -> " + std::to_string(*n) + "): counters were reset";
      return out;
    }
  }
  const core::Bandwidth rate =
      now.rate && now.rate->IsPositive() ? *now.rate : core::kFastestPortRate;
  const double bound = core::MaxFramesAtLineRate(rate, interval + kLag);
  std::array<uint64_t, kNicCounterCount> d = NicCounterDelta(before, now);
  for (size_t i = 0; i < kNicCounterCount; ++i) {
    if (static_cast<double>(d[i]) > bound) {
      char text[200];
      std::snprintf(text, sizeof(text),
                    "%s grew by %llu in %lld ms: more than a %.3g Gb/s port can count (%.3g)",
                    std::string(kNicCounterNames[i]).c_str(), static_cast<unsigned long long>(d[i]),
                    static_cast<long long>(interval.nanos() / 1000000), rate.ToGbps(), bound);
      out.verdict = NicVerdict::kImplausible;
      out.why = text;
      return out;
    }
  }
  out.delta = d;
  return out;
}

std::optional<core::Bandwidth> ParsePortRate(std::string_view text) {
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  const size_t unit = text.find(" Gb/sec");
  if (unit == std::string_view::npos || unit == 0) return std::nullopt;
  const std::string number(text.substr(0, unit));
  for (char c : number) {
    if ((c < '0' || c > '9') && c != '.') return std::nullopt;
  }
  char* end = nullptr;
  const double gbps = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(gbps > 0) || gbps > 100000) return std::nullopt;
  return core::Bandwidth::Gbps(gbps);
}

std::string SysfsNicCounters::CounterDir(const std::string& root, const std::string& device,
                                         uint32_t port) {
  return root + "/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/hw_counters";
}

NicCounterReading SysfsNicCounters::Read(const NicConfig& nic) {
  NicCounterReading r;
  const std::string dir = CounterDir(root_, nic.device, nic.port);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    r.errors.push_back(dir + ": no such directory (device '" + nic.device + "' port " +
                       std::to_string(nic.port) + " has no hw_counters)");
    return r;
  }
  // The port's rate, for the plausibility check (absent or unreadable: unknown, not an error).
  const std::string port_dir =
      root_ + "/class/infiniband/" + nic.device + "/ports/" + std::to_string(nic.port);
  if (core::Result<std::string> rate = textio::ReadTextFile(port_dir + "/rate", 256); rate.ok()) {
    r.rate = ParsePortRate(*rate);
  }
  for (size_t i = 0; i < kNicCounterCount; ++i) {
    const std::string path = dir + "/" + std::string(kNicCounterNames[i]);
    core::Result<std::string> text = textio::ReadTextFile(path, kMaxCounterFileBytes);
    if (!text.ok()) {
      // Missing: an older NIC or driver without this counter (absent, not an error).
      if (text.status().code() != core::StatusCode::kNotFound) {
        r.errors.push_back(text.status().message());
      }
      continue;
    }
    std::optional<uint64_t> v = ParseCounterValue(*text);
    if (!v) {
      r.errors.push_back(path + ": not a decimal integer (\"" + Shown(*text) + "\")");
      continue;
    }
    r.values[i] = *v;
  }
  return r;
}

}  // namespace crux::hostd
