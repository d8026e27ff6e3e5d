// The prober's handshake frames (collectors/prober/wire/handshake.h): header sizing and full decode
// with a fixed secret; the first 16 bytes after a selector byte are the nonce context.
#include <cstdint>
#include <span>

#include "collectors/prober/wire/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rdma::collectors::prober;
  std::span<const std::uint8_t> in(data, size);
  if (in.size() >= kHeaderSize) (void)frame_size(in.first(kHeaderSize));
  std::span<const std::uint8_t> context;
  if (size > 0 && (data[0] & 1) && size >= 17) {
    context = in.subspan(1, 16);
    in = in.subspan(17);
  }
  auto d = decode_frame(in, "fuzz-secret", context);
  (void)decode_status_label(d.status);
  return 0;
}
