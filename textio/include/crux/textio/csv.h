// The one CSV dialect of Crux's inputs (simulator traces and link events, the Lingjun topology):
//
// * A UTF-8 byte order mark at the start is skipped. Lines end with LF or CRLF.
// * Blank lines (spaces and tabs only) and comment lines (first non-blank character '#') are
//   skipped wherever they are; line numbers still count them.
// * Fields are separated by ',' and trimmed of surrounding spaces and tabs. There is no quoting:
//   no field of any Crux format may contain a comma, and '"' is an ordinary character (which
//   the formats' name rules refuse).
// * The first row is the header and must be exactly the format's column names; every other row
//   must have as many fields as the header.
//
// Errors (kInvalidArgument) name the 1-based line and, for a field, the 1-based column (the
// field's position in the row) and its name:
//   "line 1: missing the header 'time_s,a,b,gbps'"
//   "line 1: expected the header 'time_s,a,b,gbps' (got 't,a,b')"
//   "line 3: expected 4 comma-separated fields (got 3)"
//   "line 3, column 2 (a): unknown node 'tor9'"            (CsvFieldError, for the loaders)
// Text echoed from the input is quoted with core::QuoteName (escaped, cut to 64 bytes).
//
// Pure functions, thread-safe. Rows hold views into `text`, which must outlive them.
#ifndef CRUX_TEXTIO_CSV_H_
#define CRUX_TEXTIO_CSV_H_

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::textio {

struct CsvRow {
  int line = 0;                          // 1-based line of `text`.
  std::vector<std::string_view> fields;  // Trimmed; as many as the header's columns.
};

// The data rows of `text` (the header checked and left out), in order. `columns` are the
// header's names, e.g. {"job_id", "arrival_s", ...}; REQUIRES: not empty.
core::Result<std::vector<CsvRow>> ReadCsv(std::string_view text,
                                          std::span<const std::string_view> columns);
inline core::Result<std::vector<CsvRow>> ReadCsv(std::string_view text,
                                                 std::initializer_list<std::string_view> columns) {
  return ReadCsv(text, std::span<const std::string_view>(columns.begin(), columns.size()));
}

// kInvalidArgument "line L, column C (<columns[column]>): <what>" for field `column` (0-based)
// of `row`.
core::Status CsvFieldError(const CsvRow& row, size_t column,
                           std::span<const std::string_view> columns, std::string_view what);

// "a,b,c": the header line of `columns`.
std::string CsvHeader(std::span<const std::string_view> columns);

}  // namespace crux::textio

#endif  // CRUX_TEXTIO_CSV_H_
