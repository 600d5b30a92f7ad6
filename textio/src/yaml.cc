#include "crux/textio/yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <exception>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "crux/core/base/text.h"
#include "crux/textio/number.h"

namespace crux::textio {

// Converts yaml-cpp's node graph into YamlNode trees, within the limits.
class YamlTreeBuilder {
 public:
  YamlTreeBuilder(size_t max_nodes, int max_depth) : max_nodes_(max_nodes), max_depth_(max_depth) {}

  // Converts `in` into *out; on failure returns the error (no exception escapes from here
  // except yaml-cpp's and std::bad_alloc, which ParseYaml catches).
  core::Status Convert(const YAML::Node& in, int depth, YamlNode* out) {
    if (++nodes_ > max_nodes_) {
      return core::InvalidArgumentError(
          "invalid YAML: the document expands to more than " + std::to_string(max_nodes_) +
          " nodes (anchors and aliases may not multiply it)" + MarkText(in.Mark()));
    }
    out->line_ = in.Mark().is_null() ? 0 : in.Mark().line + 1;
    out->column_ = in.Mark().is_null() ? 0 : in.Mark().column + 1;
    switch (in.Type()) {
      case YAML::NodeType::Undefined:
        out->kind_ = YamlNode::Kind::kMissing;
        return core::Status::Ok();
      case YAML::NodeType::Null:
        out->kind_ = YamlNode::Kind::kNull;
        return core::Status::Ok();
      case YAML::NodeType::Scalar:
        out->kind_ = YamlNode::Kind::kScalar;
        out->scalar_ = in.Scalar();
        // yaml-cpp tags plain scalars "?", quoted and block ones "!", explicit tags in full.
        out->plain_ = in.Tag() == "?" || in.Tag().empty();
        return core::Status::Ok();
      case YAML::NodeType::Sequence:
      case YAML::NodeType::Map:
        break;
    }
    if (depth >= max_depth_) {
      return core::InvalidArgumentError("invalid YAML: nested more than " +
                                        std::to_string(max_depth_) + " levels deep" +
                                        MarkText(in.Mark()));
    }
    if (in.IsSequence()) {
      out->kind_ = YamlNode::Kind::kSequence;
      out->children_.reserve(in.size());
      for (const YAML::Node& item : in) {
        out->children_.emplace_back();
        CRUX_RETURN_IF_ERROR(Convert(item, depth + 1, &out->children_.back()));
      }
      return core::Status::Ok();
    }
    out->kind_ = YamlNode::Kind::kMap;
    out->children_.reserve(2 * in.size());
    for (const auto& entry : in) {
      out->children_.emplace_back();
      CRUX_RETURN_IF_ERROR(Convert(entry.first, depth + 1, &out->children_.back()));
      out->children_.emplace_back();
      CRUX_RETURN_IF_ERROR(Convert(entry.second, depth + 1, &out->children_.back()));
    }
    return core::Status::Ok();
  }

  static void MakeNull(YamlNode* node) { node->kind_ = YamlNode::Kind::kNull; }

  static std::string MarkText(const YAML::Mark& mark) {
    if (mark.is_null()) return "";
    return " (line " + std::to_string(mark.line + 1) + ", column " +
           std::to_string(mark.column + 1) + ")";
  }

 private:
  size_t max_nodes_;
  int max_depth_;
  size_t nodes_ = 0;
};

namespace {

const YamlNode& MissingNode() {
  static const YamlNode kMissing;
  return kMissing;
}

std::string AllowedList(std::span<const std::string_view> allowed) {
  std::string out;
  for (std::string_view k : allowed) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

// Counts documents from parser events (no tree is built, aliases are not expanded) and keeps
// where the last one started.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  YAML::Mark start = YAML::Mark::null_mark();
};

}  // namespace

size_t YamlNode::size() const {
  if (kind_ == Kind::kMap) return children_.size() / 2;
  if (kind_ == Kind::kSequence) return children_.size();
  return 0;
}

const YamlNode& YamlNode::Get(std::string_view key) const {
  if (kind_ != Kind::kMap) return MissingNode();
  for (size_t i = 0; i + 1 < children_.size(); i += 2) {
    if (children_[i].IsScalar() && children_[i].scalar() == key) return children_[i + 1];
  }
  return MissingNode();
}

core::Result<YamlNode> ParseYaml(std::string_view text, const YamlLimits& limits) {
  const size_t max_nodes = limits.max_nodes != 0 ? limits.max_nodes : 4 * text.size() + 1024;
  try {
    const std::string owned(text);
    // One document per file, checked on parser events for at most two documents: yaml-cpp
    // 0.7's LoadAll never ends on some malformed inputs (found by fuzz/scenario: a stray
    // "  ," line after comments makes the parser report empty documents forever; reproducer
    // fuzz/corpus/scenario/repro_loadall_hang.yaml), so it is not used.
    {
      std::istringstream in(owned);
      YAML::Parser parser(in);
      DocumentCounter counter;
      if (!parser.HandleNextDocument(counter)) {
        YamlNode root;
        YamlTreeBuilder::MakeNull(&root);
        return root;
      }
      if (parser.HandleNextDocument(counter)) {
        return core::InvalidArgumentError(
            "invalid YAML: a second document starts here (a file holds one document)" +
            YamlTreeBuilder::MarkText(counter.start));
      }
    }
    const YAML::Node doc = YAML::Load(owned);
    YamlNode root;
    YamlTreeBuilder builder(max_nodes, limits.max_depth);
    CRUX_RETURN_IF_ERROR(builder.Convert(doc, 0, &root));
    if (!root.IsDefined()) YamlTreeBuilder::MakeNull(&root);
    return root;
  } catch (const YAML::Exception& e) {
    return core::InvalidArgumentError("invalid YAML: " + e.msg + YamlTreeBuilder::MarkText(e.mark));
  } catch (const std::bad_alloc&) {
    return core::InvalidArgumentError("invalid YAML: out of memory while parsing the document");
  } catch (const std::exception& e) {
    return core::InvalidArgumentError(std::string("invalid YAML: ") + e.what());
  }
}

std::string ChildPath(const std::string& path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return path + "." + std::string(key);
}

std::string ElementPath(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string Position(const YamlNode& node) {
  if (node.line() <= 0) return "";
  return " (line " + std::to_string(node.line()) + ", column " + std::to_string(node.column()) +
         ")";
}

core::Status ErrorAt(const YamlNode& node, const std::string& path, const std::string& what,
                     core::StatusCode code) {
  std::string message =
      (path.empty() ? std::string("document") : path) + ": " + what + Position(node);
  // Keys and scalars echoed from the file may hold control characters; text already quoted
  // with core::QuoteName is printable and stays as it is.
  if (!core::IsPrintableText(message)) message = core::EscapeForTerminal(message);
  return core::Status(code, std::move(message));
}

std::string Describe(const YamlNode& node) {
  switch (node.kind()) {
    case YamlNode::Kind::kMissing:
      return "nothing";
    case YamlNode::Kind::kNull:
      return "null";
    case YamlNode::Kind::kSequence:
      return "a list";
    case YamlNode::Kind::kMap:
      return "a map";
    case YamlNode::Kind::kScalar:
      return node.plain() ? node.scalar() : "'" + node.scalar() + "'";
  }
  return "?";
}

core::Status CheckMap(const YamlNode& node, const std::string& path,
                      std::span<const std::string_view> allowed) {
  if (!node.IsMap()) return ErrorAt(node, path, "must be a map (got " + Describe(node) + ")");
  std::set<std::string_view> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YamlNode& key = node.key(i);
    if (!key.IsScalar()) {
      return ErrorAt(key, path, "keys must be plain names (got " + Describe(key) + ")");
    }
    const std::string& name = key.scalar();
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known) {
      return ErrorAt(key, ChildPath(path, name),
                     "unknown key (allowed: " + AllowedList(allowed) + ")");
    }
    if (!seen.insert(name).second) return ErrorAt(key, ChildPath(path, name), "duplicate key");
  }
  return core::Status::Ok();
}

core::Status CheckSequence(const YamlNode& node, const std::string& path) {
  if (!node.IsSequence()) {
    return ErrorAt(node, path, "must be a list (got " + Describe(node) + ")");
  }
  return core::Status::Ok();
}

core::Status MissingKey(const YamlNode& map, const std::string& path, std::string_view key) {
  return ErrorAt(map, ChildPath(path, key), "missing required key");
}

core::Result<std::string> AsString(const YamlNode& node, const std::string& path) {
  if (!node.IsScalar()) return ErrorAt(node, path, "must be a string (got " + Describe(node) + ")");
  return node.scalar();
}

core::Result<int64_t> AsInteger(const YamlNode& node, const std::string& path) {
  NumberStatus status = NumberStatus::kSyntax;
  int64_t v = 0;
  if (node.IsScalar() && node.plain()) status = ParseInteger(node.scalar(), &v);
  if (status == NumberStatus::kOk) return v;
  return ErrorAt(
      node, path,
      std::string(NumberProblem(status, /*integer=*/true)) + " (got " + Describe(node) + ")");
}

core::Result<double> AsReal(const YamlNode& node, const std::string& path) {
  NumberStatus status = NumberStatus::kSyntax;
  double v = 0;
  if (node.IsScalar() && node.plain()) status = ParseReal(node.scalar(), &v);
  if (status == NumberStatus::kOk) return v;
  return ErrorAt(
      node, path,
      std::string(NumberProblem(status, /*integer=*/false)) + " (got " + Describe(node) + ")");
}

core::Result<bool> AsBool(const YamlNode& node, const std::string& path) {
  if (node.IsScalar() && node.plain()) {
    const std::string& s = node.scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  return ErrorAt(node, path, "must be true or false (got " + Describe(node) + ")");
}

std::string IntRange::Describe() const {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (min != kMin && max != kMax) {
    return "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  }
  if (min != kMin) return ">= " + std::to_string(min);
  if (max != kMax) return "<= " + std::to_string(max);
  return "an integer";
}

bool RealRange::Contains(double v) const {
  if (std::isnan(v)) return false;
  if (min_open ? !(v > min) : !(v >= min)) return false;
  if (max_open ? !(v < max) : !(v <= max)) return false;
  return true;
}

std::string RealRange::Describe() const {
  const bool has_min = std::isfinite(min);
  const bool has_max = std::isfinite(max);
  if (has_min && has_max && !min_open && !max_open) {
    return "in [" + FormatReal(min) + ", " + FormatReal(max) + "]";
  }
  std::string out;
  if (has_min) out += std::string(min_open ? "> " : ">= ") + FormatReal(min);
  if (has_max) {
    if (!out.empty()) out += " and ";
    out += std::string(max_open ? "< " : "<= ") + FormatReal(max);
  }
  return out.empty() ? "a finite number" : out;
}

core::Result<int64_t> AsBoundedInteger(const YamlNode& node, const std::string& path,
                                       IntRange range) {
  CRUX_ASSIGN_OR_RETURN(int64_t v, AsInteger(node, path));
  if (!range.Contains(v)) {
    return ErrorAt(node, path, "must be " + range.Describe() + " (got " + node.scalar() + ")");
  }
  return v;
}

core::Result<double> AsBoundedReal(const YamlNode& node, const std::string& path, RealRange range) {
  CRUX_ASSIGN_OR_RETURN(double v, AsReal(node, path));
  if (!range.Contains(v)) {
    return ErrorAt(node, path, "must be " + range.Describe() + " (got " + node.scalar() + ")");
  }
  return v;
}

core::Status IntegerFitsError(const YamlNode& node, const std::string& path, int64_t v, int64_t lo,
                              uint64_t hi) {
  const std::string bound = v < lo ? ">= " + std::to_string(lo) : "<= " + std::to_string(hi);
  return ErrorAt(node, path, "must be " + bound + " (got " + node.scalar() + ")");
}

core::Status OptionalString(const YamlNode& map, const std::string& path, std::string_view key,
                            std::string* out) {
  const YamlNode& n = map.Get(key);
  if (!n.IsDefined()) return core::Status::Ok();
  CRUX_ASSIGN_OR_RETURN(*out, AsString(n, ChildPath(path, key)));
  return core::Status::Ok();
}

core::Status OptionalBool(const YamlNode& map, const std::string& path, std::string_view key,
                          bool* out) {
  const YamlNode& n = map.Get(key);
  if (!n.IsDefined()) return core::Status::Ok();
  CRUX_ASSIGN_OR_RETURN(*out, AsBool(n, ChildPath(path, key)));
  return core::Status::Ok();
}

core::Status OptionalReal(const YamlNode& map, const std::string& path, std::string_view key,
                          RealRange range, double* out) {
  const YamlNode& n = map.Get(key);
  if (!n.IsDefined()) return core::Status::Ok();
  CRUX_ASSIGN_OR_RETURN(*out, AsBoundedReal(n, ChildPath(path, key), range));
  return core::Status::Ok();
}

}  // namespace crux::textio
