// The prober's threads are named and timed by the core's helper (exporter/thread.h), as every
// background thread of the daemon; this header keeps the prober's spelling of it.
#pragma once

#include "exporter/thread.h"

namespace rdma::collectors::prober {

using exporter::named_thread;
using exporter::thread_cpu_seconds;

}  // namespace rdma::collectors::prober
