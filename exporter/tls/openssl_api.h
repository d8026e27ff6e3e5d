#pragma once
// OpenSSL behind a dlopen()ed module (librdma_exporter_openssl.so, beside the TLS shim): the
// daemon maps libssl and libcrypto (about 1.7 MiB of RSS) only once TLS or the prober needs them,
// not in every process that merely could. The module is built from this repository with the
// same compiler, so the table may use C++ types; its version is checked on load.
#include <cstddef>
#include <cstdint>
#include <string>

namespace rdma::exporter {
struct TlsServerConfig;
}

namespace rdma::tls {

inline constexpr int kOpenSslApiVersion = 2;

struct OpenSslApi {
  int version;
  // A server SSL_CTX* built from the web config. Throws std::runtime_error that starts with
  // origin and names the key and file at fault.
  void* (*make_server_ctx)(const exporter::TlsServerConfig& config, const std::string& origin);
  void (*free_server_ctx)(void* ctx);
  // Certificate rotation: every handshake from now on uses ctx (made by make_server_ctx, owned
  // here from now on) instead of the one the server started with; nullptr goes back to that.
  // Connections already open keep theirs.
  void (*use_server_ctx)(void* ctx);
  void (*hmac_sha256)(const std::uint8_t* key, std::size_t key_size, const std::uint8_t* data, std::size_t size,
                      std::uint8_t out[32]);
  bool (*equal_constant_time)(const void* a, const void* b, std::size_t size);
  bool (*random_bytes)(std::uint8_t* out, std::size_t size);  // false when the CSPRNG failed
};

// Loads the module on first call (thread-safe). Throws std::runtime_error naming the module
// and dlerror() when it cannot be loaded.
const OpenSslApi& openssl();

}  // namespace rdma::tls

// The module's one export.
extern "C" const rdma::tls::OpenSslApi* rdma_exporter_openssl_api();
