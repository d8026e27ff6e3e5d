// The daemon: options, collectors, HTTP, signals. main() only calls run().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exporter/collector.h"
#include "exporter/options.h"
#include "exporter/scraper.h"

namespace rdma::exporter {

// Declares the global options and every registered collector's enable flag and settings.
void declare_options(Options& options);

// A collector's effective settings as text: its collector.<name>.* values (and the content of the
// files they name), plus the global inputs every collector depends on (sysfs root, device
// filters). Equal texts: a reload keeps the running instance.
std::string effective_settings(const Options& options, const CollectorDescriptor& collector);

// The discovery and enabled collectors (not yet created) of resolved options. Throws ConfigError.
Scraper::Config scraper_config(const Options& options);
// Builds a scraper (discovery + enabled collectors) from resolved options. Throws ConfigError.
std::unique_ptr<Scraper> build_scraper(const Options& options);

// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
int run(int argc, const char* const* argv);

}  // namespace rdma::exporter
