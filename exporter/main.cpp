#include <malloc.h>

#include "exporter/app.h"

int main(int argc, char** argv) {
  // Short-lived scrape threads would each get a glibc malloc arena; one arena keeps the
  // resident set small (about 1 MiB less) and the allocation rate here is far from contended.
  mallopt(M_ARENA_MAX, 1);
  // Blocks of 1 MiB and more (the exposition text of a large fabric: tens of MB) always get
  // their own mapping, returned at free. Setting it also stops glibc from raising the threshold
  // after such a free, which would leave the next big text in the heap, resident for good.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  return rdma::exporter::run(argc, argv);
}
