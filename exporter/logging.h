// spdlog set-up: logfmt or JSON lines on stderr, at the chosen level.
#pragma once

#include <string>

namespace rdma::exporter {
struct LogSettings {
  int level = 0;  // spdlog::level::level_enum
  bool json = false;
};
// Throws std::invalid_argument for an unknown level or format.
LogSettings parse_log_settings(const std::string& level, const std::string& format);
// The first call installs the logger; later ones (a reload) change its level and format in
// place, which is safe while other threads log (replacing the default logger is not).
void setup_logging(const LogSettings& settings);
}  // namespace rdma::exporter
