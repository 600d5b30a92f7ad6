#include "crux/textio/yaml_writer.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <string>

#include "crux/textio/number.h"

namespace crux::textio {

struct YamlWriter::Impl {
  YAML::Emitter out;
  std::string error;  // The first failure (yaml-cpp reports misuse through good()/exceptions).

  template <typename F>
  void Do(F&& f) {
    if (!error.empty()) return;
    try {
      f(out);
      if (!out.good()) error = out.GetLastError();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
};

YamlWriter::YamlWriter() : impl_(std::make_unique<Impl>()) {
  impl_->Do([](YAML::Emitter& e) { e.SetIndent(2); });
}

YamlWriter::~YamlWriter() = default;

YamlWriter& YamlWriter::Comment(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  impl_->Do([&](YAML::Emitter& e) { e << YAML::Comment(line); });
  return *this;
}

YamlWriter& YamlWriter::BeginMap(Style style) {
  impl_->Do([&](YAML::Emitter& e) {
    if (style == kFlow) e << YAML::Flow;
    e << YAML::BeginMap;
  });
  return *this;
}

YamlWriter& YamlWriter::EndMap() {
  impl_->Do([](YAML::Emitter& e) { e << YAML::EndMap; });
  return *this;
}

YamlWriter& YamlWriter::BeginList(Style style) {
  impl_->Do([&](YAML::Emitter& e) {
    if (style == kFlow) e << YAML::Flow;
    e << YAML::BeginSeq;
  });
  return *this;
}

YamlWriter& YamlWriter::EndList() {
  impl_->Do([](YAML::Emitter& e) { e << YAML::EndSeq; });
  return *this;
}

YamlWriter& YamlWriter::Key(std::string_view key) {
  impl_->Do([&](YAML::Emitter& e) { e << YAML::Key << std::string(key) << YAML::Value; });
  return *this;
}

YamlWriter& YamlWriter::String(std::string_view value) {
  impl_->Do([&](YAML::Emitter& e) { e << YAML::DoubleQuoted << std::string(value); });
  return *this;
}

YamlWriter& YamlWriter::Integer(int64_t value) {
  impl_->Do([&](YAML::Emitter& e) { e << std::to_string(value); });
  return *this;
}

YamlWriter& YamlWriter::Unsigned(uint64_t value) {
  impl_->Do([&](YAML::Emitter& e) { e << std::to_string(value); });
  return *this;
}

YamlWriter& YamlWriter::Real(double value) {
  impl_->Do([&](YAML::Emitter& e) { e << FormatReal(value); });
  return *this;
}

YamlWriter& YamlWriter::Bool(bool value) {
  impl_->Do([&](YAML::Emitter& e) { e << (value ? "true" : "false"); });
  return *this;
}

std::string YamlWriter::Finish() {
  if (!impl_->error.empty()) return "# YAML emitter error: " + impl_->error + "\n";
  std::string text = impl_->out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace crux::textio
