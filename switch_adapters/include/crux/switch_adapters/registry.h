// BackendRegistry: backends by name, so that crux-switch-agent picks one without knowing any of
// them. Each backend folder exports one descriptor (`SonicBackend()`, `FileBackend()`,
// `LogBackend()`): its name, the parameters it takes (they become `--<name>` options of the
// agent) and a factory. builtin_backends.h lists the backends compiled into the binary; adding a
// backend is a new folder plus one line there, main.cc does not change.
//
// Parameters are strings as given on the command line; each factory parses its own with the
// Param* helpers below, whose errors name the option ("--redis-port: 'x' is not an integer").
//
// Thread-safety: a registry is immutable once filled; Find/Create may then be called from any
// thread. Factories are called on the caller's thread.
#ifndef CRUX_SWITCH_ADAPTERS_REGISTRY_H_
#define CRUX_SWITCH_ADAPTERS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/switch_adapters/adapter.h"
#include "crux/switch_adapters/enforcement.h"
#include "crux/switch_adapters/port_monitor.h"

namespace crux::switch_adapters {

// One parameter of a backend: the agent's option `--<name>`.
struct BackendParam {
  std::string name;  // [a-z0-9-]+, e.g. "redis-socket".
  std::string help;
  bool flag = false;          // Takes no value ("--no-pfc"); its value is "true" when given.
  std::string default_value;  // Shown in --help; the factory applies it when absent.
};

// What a factory gets: the switch and the parameters that were given (by name, without "--").
struct BackendConfig {
  std::string switch_name;  // Topology node name; required.
  std::map<std::string, std::string> params;
};

struct Backend {
  std::string name;     // "sonic"; [a-z0-9-]+.
  std::string summary;  // One line for --help.
  std::vector<BackendParam> params;
  std::function<core::Result<std::unique_ptr<SwitchAdapter>>(const BackendConfig&)> create;
  // Optional: a monitor of the switch's ports (port_monitor.h) from the same parameters; null
  // when the backend cannot watch ports.
  std::function<core::Result<std::unique_ptr<PortMonitor>>(const BackendConfig&)> create_monitor =
      nullptr;  // Optional: a verifier of what the switch applied (enforcement.h) from the same
                // parameters and
  // the traffic thresholds; null when the backend cannot verify.
  std::function<core::Result<std::unique_ptr<EnforcementVerifier>>(const BackendConfig&,
                                                                   const QueueCheckOptions&)>
      create_verifier = nullptr;
};

class BackendRegistry {
 public:
  // kInvalidArgument for a bad name, a missing factory or a bad/duplicate parameter name;
  // kAlreadyExists when the name is taken.
  core::Status Add(Backend backend);

  const Backend* Find(std::string_view name) const;  // Null when unknown.
  std::vector<std::string> Names() const;            // In the order added.
  const std::vector<Backend>& backends() const { return backends_; }

  // Builds backend `name` from `config`. Errors: kNotFound ("backend 'x' is unknown (built in:
  // sonic, file, log)"); kInvalidArgument for a missing switch name or a parameter the backend
  // does not take ("--state-dir: not a parameter of the sonic backend"); then the factory's own.
  core::Result<std::unique_ptr<SwitchAdapter>> Create(std::string_view name,
                                                      const BackendConfig& config) const;
  // The backend's port monitor, checked like Create. kFailedPrecondition when the backend cannot
  // watch ports ("backend 'file' cannot watch ports").
  core::Result<std::unique_ptr<PortMonitor>> CreateMonitor(std::string_view name,
                                                           const BackendConfig& config) const;
  // The backend's enforcement verifier, checked like Create. kFailedPrecondition when the backend
  // cannot verify ("the file backend cannot verify enforcement").
  core::Result<std::unique_ptr<EnforcementVerifier>> CreateVerifier(
      std::string_view name, const BackendConfig& config, const QueueCheckOptions& options) const;

 private:
  // The backend, after the checks Create describes.
  core::Result<const Backend*> Checked(std::string_view name, const BackendConfig& config) const;
  std::vector<Backend> backends_;
};

// Parameter helpers for factories. `fallback` is used when the parameter was not given.
std::string ParamString(const BackendConfig& c, const std::string& name,
                        const std::string& fallback = "");
// Decimal integer in [min, max]; errors name "--<name>".
core::Result<int> ParamInt(const BackendConfig& c, const std::string& name, int fallback, int min,
                           int max);
// A flag parameter: true when given as "true" (or "1"/"yes"), false when absent or "false".
core::Result<bool> ParamFlag(const BackendConfig& c, const std::string& name);
// Comma-separated list; surrounding spaces are trimmed, empty items are an error naming the option.
core::Result<std::vector<std::string>> ParamList(const BackendConfig& c, const std::string& name);

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_REGISTRY_H_
