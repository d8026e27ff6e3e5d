// build_info() alone in its file: the git revision is a compile definition of this file only
// (exporter/CMakeLists.txt), so a new commit recompiles one small file, not the whole core, and
// the compiler cache keeps serving every other object across commits.
#include "exporter/scraper.h"

#ifndef RDMA_EXPORTER_VERSION
#define RDMA_EXPORTER_VERSION "0.0.0"
#endif
#ifndef RDMA_EXPORTER_REVISION
#define RDMA_EXPORTER_REVISION "unknown"
#endif

namespace rdma::exporter {

BuildInfo build_info() {
#if defined(__clang__)
  std::string compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  std::string compiler = "gcc " __VERSION__;
#else
  std::string compiler = "unknown";
#endif
  return BuildInfo{RDMA_EXPORTER_VERSION, RDMA_EXPORTER_REVISION, compiler};
}

}  // namespace rdma::exporter
