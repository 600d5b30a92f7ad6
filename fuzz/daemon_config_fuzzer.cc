// Fuzz target: the cruxd configuration YAML, through daemon::ParseConfig (what cruxd reads at
// start and on SIGHUP). An accepted config must also render (EffectiveConfigYaml) and its
// rendering must parse back to a config that passes ValidateConfig. Seeds: configs/cruxd.yaml
// and small variants. Dictionary: fuzz/dict/daemon_config.dict.
#include <cstddef>
#include <cstdint>
#include <string>

#include "crux/daemon/config/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kBaseDir = std::string(CRUX_SOURCE_DIR) + "/configs";
  auto config = crux::daemon::ParseConfig(crux::fuzz::AsText(data, size), kBaseDir);
  if (!config.ok()) {
    crux::fuzz::CheckError(config.status(), "ParseConfig");
    return 0;
  }
  if (crux::core::Status s = crux::daemon::ValidateConfig(*config); !s.ok()) {
    crux::fuzz::Violated("ParseConfig accepted a config that fails ValidateConfig:", s.ToString());
  }
  (void)crux::daemon::AdminEndpoint(*config);
  (void)crux::daemon::DatabasePath(*config);
  (void)crux::daemon::TopologyPath(*config);
  (void)crux::daemon::ToPlannerOptions(config->planner);
  (void)crux::daemon::RestartOnlyChanges(crux::daemon::BuiltinDefaults(), *config);
  (void)crux::daemon::EffectiveConfigYaml(*config);
  return 0;
}
