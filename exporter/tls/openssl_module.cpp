// The OpenSSL module (see openssl_api.h): everything in the daemon that calls OpenSSL.
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "exporter/tls/openssl_api.h"
#include "exporter/web_config.h"

namespace rdma::tls {
namespace {

using exporter::ClientAuth;
using exporter::TlsServerConfig;

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// Accepts any client certificate (RequestClientCert, RequireAnyClientCert: presence only).
int accept_any_certificate(int, X509_STORE_CTX*) { return 1; }

// Builds the server SSL_CTX from the web config; throws std::runtime_error naming the file.
// The context of the last reload (nullptr: none). Each handshake switches to it in its
// ClientHello callback, which runs before the server picks its certificate; SNI is not needed
// (Prometheus sends none when it scrapes an IP address).
std::mutex current_mu;
SSL_CTX* current = nullptr;

int switch_to_current(SSL* ssl, int*, void*) {
  std::lock_guard lock(current_mu);
  if (current && SSL_get_SSL_CTX(ssl) != current) {
    SSL_set_SSL_CTX(ssl, current);  // certificate, key, CA store; takes its own reference
    SSL_set_verify(ssl, SSL_CTX_get_verify_mode(current), SSL_CTX_get_verify_callback(current));
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

void use_server_ctx(void* ctx) {
  std::lock_guard lock(current_mu);
  SSL_CTX_free(std::exchange(current, static_cast<SSL_CTX*>(ctx)));  // NULL-safe
}

void* make_server_ctx(const TlsServerConfig& t, const std::string& origin) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) throw std::runtime_error("TLS: SSL_CTX_new failed: " + openssl_errors());
  auto fail = [&](const std::string& what) {
    std::string msg = origin + ": " + what + ": " + openssl_errors();
    SSL_CTX_free(ctx);
    throw std::runtime_error(msg);
  };
  SSL_CTX_set_min_proto_version(ctx, t.min_version ? t.min_version : TLS1_2_VERSION);
  if (t.max_version) SSL_CTX_set_max_proto_version(ctx, t.max_version);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
  if (SSL_CTX_use_certificate_chain_file(ctx, t.cert_file.c_str()) != 1)
    fail("tls_server_config.cert_file " + t.cert_file + " cannot be used");
  if (SSL_CTX_use_PrivateKey_file(ctx, t.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    fail("tls_server_config.key_file " + t.key_file + " cannot be used");
  if (SSL_CTX_check_private_key(ctx) != 1) fail("tls_server_config.key_file does not match cert_file");
  int mode = SSL_VERIFY_NONE;
  SSL_verify_cb cb = nullptr;
  switch (t.client_auth) {
    case ClientAuth::kNoClientCert: break;
    case ClientAuth::kRequestClientCert: mode = SSL_VERIFY_PEER; cb = accept_any_certificate; break;
    case ClientAuth::kRequireAnyClientCert:
      mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
      cb = accept_any_certificate;
      break;
    case ClientAuth::kVerifyClientCertIfGiven: mode = SSL_VERIFY_PEER; break;
    case ClientAuth::kRequireAndVerifyClientCert: mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT; break;
  }
  if (!t.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, t.client_ca_file.c_str(), nullptr) != 1)
      fail("tls_server_config.client_ca_file " + t.client_ca_file + " cannot be used");
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(t.client_ca_file.c_str());
    if (names) SSL_CTX_set_client_CA_list(ctx, names);
  }
  SSL_CTX_set_verify(ctx, mode, cb);
  SSL_CTX_set_client_hello_cb(ctx, switch_to_current, nullptr);
  // Sessions are not resumed across restarts; a fixed id context keeps client-cert sessions valid.
  static const unsigned char kSid[] = "rdma_exporter";
  SSL_CTX_set_session_id_context(ctx, kSid, sizeof kSid - 1);
  return ctx;
}

void free_server_ctx(void* ctx) { SSL_CTX_free(static_cast<SSL_CTX*>(ctx)); }

void hmac_sha256(const std::uint8_t* key, std::size_t key_size, const std::uint8_t* data, std::size_t size,
                 std::uint8_t out[32]) {
  static const std::uint8_t kEmpty = 0;  // HMAC() wants a non-NULL key even when it is empty
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_size ? key : &kEmpty, static_cast<int>(key_size), data, size, out, &len);
}

bool equal_constant_time(const void* a, const void* b, std::size_t size) { return CRYPTO_memcmp(a, b, size) == 0; }

bool random_bytes(std::uint8_t* out, std::size_t size) { return RAND_bytes(out, static_cast<int>(size)) == 1; }

const OpenSslApi kApi{kOpenSslApiVersion, make_server_ctx, free_server_ctx, use_server_ctx, hmac_sha256,
                     equal_constant_time, random_bytes};

}  // namespace
}  // namespace rdma::tls

extern "C" __attribute__((visibility("default"))) const rdma::tls::OpenSslApi* rdma_exporter_openssl_api() {
  return &rdma::tls::kApi;
}
