// spdlog set-up: logfmt or JSON lines on stderr, at the chosen level.
#pragma once

#include "exporter/options.h"

namespace rdma::exporter {
struct LogSettings {
  int level = 0;  // spdlog::level::level_enum
  bool json = false;
};
// log.level and log.format; a ConfigError names the bad one.
LogSettings log_settings(const Options& options);
// The first call installs the logger; later ones (a reload) change its level and format in
// place, which is safe while other threads log (replacing the default logger is not).
void setup_logging(const LogSettings& settings);
}  // namespace rdma::exporter
