// Test double for a PMA agent that does not implement some optional attributes (ibsim implements
// them all). Preloaded (LD_PRELOAD) into the exporter beside ibsim's umad2sim shim, it wraps
// libibumad's umad_send and umad_recv (the real ones from dlsym(RTLD_NEXT)): a PerfMgt Get sent to
// a listed (LID, attribute[, PortSelect]) gets the simulator's real answer rewritten into what such
// an agent sends: MAD status 0x000C (method/attribute combination not supported, IBA 13.4.7) and
// zeroed data. So the real exporter and libibumad talk to a real simulated fabric with one chosen
// agent quirk; everything else passes through untouched.
//
// $PMA_DOUBLE_UNSUPPORTED names a file of lines "<lid> <attribute id> [<port select>]" (C number
// notation, '#' comments). It is read again for every PerfMgt reply, so a test can change the
// agent (a firmware upgrade) while the exporter runs.
#include <dlfcn.h>
#include <infiniband/umad.h>

#include <arpa/inet.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace {

constexpr std::uint8_t kPerfMgtClass = 0x04;
constexpr std::size_t kDataOffset = 64;  // PMA attribute data in the MAD
constexpr std::size_t kMadSize = 256;

struct Request {
  unsigned lid, attr, port_select;
};

std::mutex mu;
std::unordered_map<std::uint32_t, Request> sent;  // PerfMgt Gets by the low 32 bits of their TID

unsigned be16(const std::uint8_t* p) { return (unsigned{p[0]} << 8) | p[1]; }
std::uint32_t tid_low(const std::uint8_t* mad) {
  return (std::uint32_t{mad[12]} << 24) | (std::uint32_t{mad[13]} << 16) | (std::uint32_t{mad[14]} << 8) | mad[15];
}

bool listed(const Request& r) {
  const char* path = std::getenv("PMA_DOUBLE_UNSUPPORTED");
  FILE* f = path ? std::fopen(path, "r") : nullptr;
  if (!f) return false;
  bool hit = false;
  char line[256];
  while (!hit && std::fgets(line, sizeof line, f)) {
    if (char* hash = std::strchr(line, '#')) *hash = '\0';
    int lid = 0, attr = 0, port = 0;
    const int n = std::sscanf(line, "%i %i %i", &lid, &attr, &port);
    hit = n >= 2 && static_cast<unsigned>(lid) == r.lid && static_cast<unsigned>(attr) == r.attr &&
          (n == 2 || static_cast<unsigned>(port) == r.port_select);
  }
  std::fclose(f);
  return hit;
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int umad_send(int fd, int agentid, void* umad, int length, int timeout_ms, int retries) {
  static const auto real = next<int (*)(int, int, void*, int, int, int)>("umad_send");
  const auto* mad = static_cast<const std::uint8_t*>(umad_get_mad(umad));
  if (length >= static_cast<int>(kMadSize) && mad[1] == kPerfMgtClass && mad[3] == 0x01) {  // Get
    std::lock_guard lock(mu);
    if (sent.size() > 100000) sent.clear();  // requests that never got an answer
    sent[tid_low(mad)] = {ntohs(umad_get_mad_addr(umad)->lid), be16(mad + 16), mad[kDataOffset + 1]};
  }
  return real(fd, agentid, umad, length, timeout_ms, retries);
}

extern "C" int umad_recv(int fd, void* umad, int* length, int timeout_ms) {
  static const auto real = next<int (*)(int, void*, int*, int)>("umad_recv");
  const int rc = real(fd, umad, length, timeout_ms);
  if (rc < 0 || umad_status(umad) != 0 || !length || *length < static_cast<int>(kMadSize)) return rc;
  auto* mad = static_cast<std::uint8_t*>(umad_get_mad(umad));
  if (mad[1] != kPerfMgtClass || mad[3] != 0x81) return rc;  // GetResp
  Request req{};
  {
    std::lock_guard lock(mu);
    auto it = sent.find(tid_low(mad));
    if (it == sent.end()) return rc;
    req = it->second;
    sent.erase(it);
  }
  if (req.attr == be16(mad + 16) && listed(req)) {
    mad[4] = 0x00;
    mad[5] = 0x0C;
    std::memset(mad + kDataOffset, 0, kMadSize - kDataOffset);
  }
  return rc;
}
