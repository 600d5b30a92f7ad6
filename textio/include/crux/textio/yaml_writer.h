// YAML output through yaml-cpp's YAML::Emitter (the daemon's effective config; anything else
// Crux writes as YAML). Strings are always written double-quoted with YAML escapes, so any
// string - quotes, colons, '#', newlines, leading spaces, "true", "8", "null", unicode - reads
// back through crux/textio/yaml.h as the same string (and never as a number or a boolean).
// Numbers and booleans are written plain: integers in decimal, reals with FormatReal
// (number.h: the shortest text that reads back exactly). Bytes that are not valid UTF-8 are
// written as U+FFFD (the replacement character): the loaders refuse such text anyway.
//
// Usage:
//   YamlWriter w;
//   w.Comment("source: /etc/cruxd.yaml");
//   w.BeginMap();
//   w.Key("levels").Integer(8).Comment("live");
//   w.Key("dscp_pool").BeginList(YamlWriter::kFlow).Integer(1).Integer(2).EndList();
//   w.EndMap();
//   std::string text = w.Finish();
//
// Not thread-safe (one writer per thread); the calls must form a well-nested document
// (Finish reports a misuse as "# YAML emitter error: ..." text instead of throwing).
#ifndef CRUX_TEXTIO_YAML_WRITER_H_
#define CRUX_TEXTIO_YAML_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace crux::textio {

class YamlWriter {
 public:
  enum Style { kBlock, kFlow };

  YamlWriter();
  ~YamlWriter();
  YamlWriter(const YamlWriter&) = delete;
  YamlWriter& operator=(const YamlWriter&) = delete;

  // "# text": on its own line before the document or a key, else after the value just
  // written. Newlines in `text` become spaces.
  YamlWriter& Comment(std::string_view text);

  YamlWriter& BeginMap(Style style = kBlock);
  YamlWriter& EndMap();
  YamlWriter& BeginList(Style style = kBlock);
  YamlWriter& EndList();

  // A map key (written plain when it is a plain name, else quoted).
  YamlWriter& Key(std::string_view key);

  // Values (map values or list items).
  YamlWriter& String(std::string_view value);
  YamlWriter& Integer(int64_t value);
  YamlWriter& Unsigned(uint64_t value);
  YamlWriter& Real(double value);
  YamlWriter& Bool(bool value);

  // The document, ending with a newline.
  std::string Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crux::textio

#endif  // CRUX_TEXTIO_YAML_WRITER_H_
