// spdlog set-up: logfmt or JSON lines on stderr, at the chosen level.
#pragma once

#include <string>

namespace rdma::exporter {
// Throws std::invalid_argument for an unknown level or format.
void setup_logging(const std::string& level, const std::string& format);
}  // namespace rdma::exporter
