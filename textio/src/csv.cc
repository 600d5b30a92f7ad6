#include "crux/textio/csv.h"

#include "crux/core/base/ids.h"
#include "crux/core/base/text.h"

namespace crux::textio {
namespace {

std::string LineRef(int line) { return "line " + std::to_string(line); }

}  // namespace

std::string CsvHeader(std::span<const std::string_view> columns) {
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (i > 0) out += ',';
    out += columns[i];
  }
  return out;
}

core::Result<std::vector<CsvRow>> ReadCsv(std::string_view text,
                                          std::span<const std::string_view> columns) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<CsvRow> rows;
  bool header_seen = false;
  int line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = core::Trim(line);
    if (line.empty() || line.front() == '#') continue;
    CsvRow row;
    row.line = line_no;
    size_t pos = 0;
    while (true) {
      const size_t comma = line.find(',', pos);
      if (comma == std::string_view::npos) {
        row.fields.push_back(core::Trim(line.substr(pos)));
        break;
      }
      row.fields.push_back(core::Trim(line.substr(pos, comma - pos)));
      pos = comma + 1;
    }
    if (!header_seen) {
      bool same = row.fields.size() == columns.size();
      for (size_t i = 0; same && i < columns.size(); ++i) same = row.fields[i] == columns[i];
      if (!same) {
        return core::InvalidArgumentError(LineRef(line_no) + ": expected the header '" +
                                          CsvHeader(columns) + "' (got " + core::QuoteName(line) +
                                          ")");
      }
      header_seen = true;
      continue;
    }
    if (row.fields.size() != columns.size()) {
      return core::InvalidArgumentError(
          LineRef(line_no) + ": expected " + std::to_string(columns.size()) +
          " comma-separated fields (got " + std::to_string(row.fields.size()) + ")");
    }
    rows.push_back(std::move(row));
  }
  if (!header_seen) {
    return core::InvalidArgumentError("line 1: missing the header '" + CsvHeader(columns) + "'");
  }
  return rows;
}

core::Status CsvFieldError(const CsvRow& row, size_t column,
                           std::span<const std::string_view> columns, std::string_view what) {
  const std::string name = column < columns.size() ? std::string(columns[column]) : "?";
  return core::InvalidArgumentError(LineRef(row.line) + ", column " + std::to_string(column + 1) +
                                    " (" + name + "): " + std::string(what));
}

}  // namespace crux::textio
