// The daemon: options, collectors, HTTP, signals. main() only calls run().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exporter/options.h"
#include "exporter/scraper.h"

namespace rdma::exporter {

// Declares the global options and every registered collector's enable flag and settings.
void declare_options(Options& options);

// Builds a scraper (discovery + enabled collectors) from resolved options. Throws ConfigError.
std::unique_ptr<Scraper> build_scraper(const Options& options);

// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
int run(int argc, const char* const* argv);

}  // namespace rdma::exporter
