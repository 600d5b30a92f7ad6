#include "crux/spec/lingjun_csv.h"

#include <string>
#include <utility>
#include <vector>

#include "crux/textio/csv.h"

namespace crux::spec {

core::Result<core::LingjunLayout> ParseLingjunCsv(std::string_view csv) {
  core::Result<std::vector<textio::CsvRow>> rows =
      textio::ReadCsv(csv, {"ip", "DSW", "PSW", "ASW"});
  if (!rows.ok()) {
    return core::Status(rows.status().code(), "lingjun csv " + rows.status().message());
  }
  core::LingjunLayout layout;
  layout.hosts.reserve(rows->size());
  for (const textio::CsvRow& row : *rows) {
    core::LingjunHostRow host;
    host.ip = std::string(row.fields[0]);
    host.dsw = std::string(row.fields[1]);
    host.psw = std::string(row.fields[2]);
    host.asw = std::string(row.fields[3]);
    host.line = row.line;
    layout.hosts.push_back(std::move(host));
  }
  return layout;
}

core::Result<core::Topology> BuildLingjunFromCsv(std::string_view csv,
                                                 const core::LingjunParams& params) {
  CRUX_ASSIGN_OR_RETURN(core::LingjunLayout layout, ParseLingjunCsv(csv));
  return core::BuildLingjun(layout, params);
}

}  // namespace crux::spec
