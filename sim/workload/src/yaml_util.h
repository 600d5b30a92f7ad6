// Strict YAML reading helpers for the workload files (models, scenarios). Every error names the
// key path and, when yaml-cpp knows it, the position: "models[2].gpu: must be a string (line 9,
// column 10)". Only call these inside a try block that turns YAML::Exception into a Status.
#ifndef CRUX_SIM_WORKLOAD_SRC_YAML_UTIL_H_
#define CRUX_SIM_WORKLOAD_SRC_YAML_UTIL_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "crux/core/status.h"

namespace crux::sim::workload::internal {

std::string Where(const YAML::Node& n);
core::Status ErrorAt(const YAML::Node& n, const std::string& path, const std::string& msg);
std::string Child(const std::string& path, std::string_view key);
std::string Index(const std::string& path, size_t i);

// Parses a whole document (empty documents become a Null node). Errors: kInvalidArgument.
core::Result<YAML::Node> ParseDocument(std::string_view text);

// `n` must be a map whose keys are all in `allowed` (and not repeated).
core::Status CheckMap(const YAML::Node& n, const std::string& path,
                      std::initializer_list<std::string_view> allowed);
bool Has(const YAML::Node& map, std::string_view key);
// The value of `key` (an undefined node when absent). REQUIRES: map.IsMap().
YAML::Node Get(const YAML::Node& map, std::string_view key);

// Scalar readers. `required` = false leaves *out untouched when the key is absent.
core::Status ReadString(const YAML::Node& map, const std::string& path, std::string_view key,
                        bool required, std::string* out);
// Finite number; plain scalars only (quoted numbers are errors). min/max are inclusive unless
// `min_exclusive`.
core::Status ReadNumber(const YAML::Node& map, const std::string& path, std::string_view key,
                        bool required, double min, bool min_exclusive, double max, double* out);
core::Status ReadInt(const YAML::Node& map, const std::string& path, std::string_view key,
                     bool required, int64_t min, int64_t max, int64_t* out);
core::Status ReadBool(const YAML::Node& map, const std::string& path, std::string_view key,
                      bool* out);

}  // namespace crux::sim::workload::internal

#endif  // CRUX_SIM_WORKLOAD_SRC_YAML_UTIL_H_
