#include "crux/switch_adapters/registry.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>
#include <utility>

#include "crux/core/base/text.h"

namespace crux::switch_adapters {
namespace {

bool ValidName(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

const std::string* Given(const BackendConfig& c, const std::string& name) {
  auto it = c.params.find(name);
  return it == c.params.end() ? nullptr : &it->second;
}

}  // namespace

core::Status BackendRegistry::Add(Backend backend) {
  if (!ValidName(backend.name)) {
    return core::InvalidArgumentError("backend name '" + backend.name + "': must match [a-z0-9-]+");
  }
  if (!backend.create) {
    return core::InvalidArgumentError("backend " + backend.name + ": no factory");
  }
  std::set<std::string> seen;
  for (const BackendParam& p : backend.params) {
    if (!ValidName(p.name) || !seen.insert(p.name).second) {
      return core::InvalidArgumentError("backend " + backend.name + ": parameter '" + p.name +
                                        "' is malformed or given twice");
    }
  }
  if (Find(backend.name) != nullptr) {
    return core::AlreadyExistsError("backend " + backend.name + ": registered twice");
  }
  backends_.push_back(std::move(backend));
  return core::Status::Ok();
}

const Backend* BackendRegistry::Find(std::string_view name) const {
  for (const Backend& b : backends_) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> out;
  for (const Backend& b : backends_) out.push_back(b.name);
  return out;
}

core::Result<std::unique_ptr<SwitchAdapter>> BackendRegistry::Create(
    std::string_view name, const BackendConfig& config) const {
  CRUX_ASSIGN_OR_RETURN(const Backend* b, Checked(name, config));
  return b->create(config);
}

core::Result<std::unique_ptr<PortMonitor>> BackendRegistry::CreateMonitor(
    std::string_view name, const BackendConfig& config) const {
  CRUX_ASSIGN_OR_RETURN(const Backend* b, Checked(name, config));
  if (!b->create_monitor) {
    return core::FailedPreconditionError("backend '" + b->name + "' cannot watch ports");
  }
  return b->create_monitor(config);
}

core::Result<std::unique_ptr<EnforcementVerifier>> BackendRegistry::CreateVerifier(
    std::string_view name, const BackendConfig& config, const QueueCheckOptions& options) const {
  CRUX_ASSIGN_OR_RETURN(const Backend* b, Checked(name, config));
  if (!b->create_verifier) {
    return core::FailedPreconditionError("the " + b->name + " backend cannot verify enforcement");
  }
  CRUX_RETURN_IF_ERROR(ValidateQueueCheckOptions(options));
  return b->create_verifier(config, options);
}

core::Result<const Backend*> BackendRegistry::Checked(std::string_view name,
                                                      const BackendConfig& config) const {
  const Backend* b = Find(name);
  if (b == nullptr) {
    return core::NotFoundError("backend '" + std::string(name) +
                               "' is unknown (built in: " + Join(Names()) + ")");
  }
  if (config.switch_name.empty()) return core::InvalidArgumentError("--switch-name: required");
  // Not a structured binding: clang 14 (the tsan preset) cannot capture one in the lambda below.
  for (const auto& entry : config.params) {
    const std::string& param = entry.first;
    const bool known = std::any_of(b->params.begin(), b->params.end(),
                                   [&](const BackendParam& p) { return p.name == param; });
    if (!known) {
      std::vector<std::string> names;
      for (const BackendParam& p : b->params) names.push_back("--" + p.name);
      return core::InvalidArgumentError(
          "--" + param + ": not a parameter of the " + b->name +
          " backend (its parameters: " + (names.empty() ? "none" : Join(names)) + ")");
    }
  }
  return b;
}

std::string ParamString(const BackendConfig& c, const std::string& name,
                        const std::string& fallback) {
  const std::string* v = Given(c, name);
  return v == nullptr ? fallback : *v;
}

core::Result<int> ParamInt(const BackendConfig& c, const std::string& name, int fallback, int min,
                           int max) {
  const std::string* v = Given(c, name);
  if (v == nullptr) return fallback;
  int out = 0;
  const char* end = v->data() + v->size();
  auto [ptr, ec] = std::from_chars(v->data(), end, out);
  if (v->empty() || ec != std::errc() || ptr != end) {
    return core::InvalidArgumentError("--" + name + ": '" + *v + "' is not an integer");
  }
  if (out < min || out > max) {
    return core::InvalidArgumentError("--" + name + ": " + *v + " is out of range " +
                                      std::to_string(min) + ".." + std::to_string(max));
  }
  return out;
}

core::Result<bool> ParamFlag(const BackendConfig& c, const std::string& name) {
  const std::string* v = Given(c, name);
  if (v == nullptr || *v == "false" || *v == "0" || *v == "no") return false;
  if (*v == "true" || *v == "1" || *v == "yes") return true;
  return core::InvalidArgumentError("--" + name + ": '" + *v + "' is not true or false");
}

core::Result<std::vector<std::string>> ParamList(const BackendConfig& c, const std::string& name) {
  std::vector<std::string> out;
  const std::string* v = Given(c, name);
  if (v == nullptr) return out;
  size_t start = 0;
  while (start <= v->size()) {
    size_t comma = v->find(',', start);
    if (comma == std::string::npos) comma = v->size();
    std::string item(core::Trim(std::string_view(*v).substr(start, comma - start)));
    if (item.empty()) {
      return core::InvalidArgumentError("--" + name + ": empty item in '" + *v + "'");
    }
    out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

}  // namespace crux::switch_adapters
