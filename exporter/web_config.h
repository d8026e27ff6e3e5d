// --web.config.file in the format of Prometheus' exporter-toolkit (docs/security.md):
//
//   tls_server_config:
//     cert_file: server.crt          # relative paths are relative to the web config file
//     key_file: server.key
//     client_auth_type: RequireAndVerifyClientCert   # NoClientCert (default), RequestClientCert,
//     client_ca_file: ca.crt         #   RequireAnyClientCert, VerifyClientCertIfGiven
//     min_version: TLS12             # TLS10..TLS13; max_version likewise
//   basic_auth_users:
//     prometheus: $2y$10$...         # bcrypt hashes only ($2a$, $2b$, $2y$), checked with libxcrypt
//
// Unknown keys are errors (exporter-toolkit parses strictly); toolkit keys this exporter does not
// implement (cipher_suites, curve_preferences, http_server_config, ...) are errors too, never
// silently ignored. Parsing is pure (fuzzed); loading also checks that the files are readable.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace rdma::exporter {

enum class ClientAuth : std::uint8_t {
  kNoClientCert,
  kRequestClientCert,
  kRequireAnyClientCert,
  kVerifyClientCertIfGiven,
  kRequireAndVerifyClientCert,
};

struct TlsServerConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  int min_version = 0;  // OpenSSL TLS1_x_VERSION numbers (0x0303 = TLS 1.2); 0 = library default
  int max_version = 0;
};

struct WebConfig {
  std::optional<TlsServerConfig> tls;                  // absent: plain HTTP
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash; empty: no auth
  std::string origin;                                   // the file, for messages
};

// Parses the YAML text. Relative file names are resolved against base_dir. Throws ConfigError
// whose message starts with origin (and line:col where known) and names the key.
WebConfig parse_web_config(const std::string& yaml, const std::string& origin, const std::string& base_dir);
// Reads and parses the file, then checks that every referenced file can be opened.
WebConfig load_web_config(const std::string& path);

// True when the string has the shape of a bcrypt hash libxcrypt can check ("$2b$10$" + 53 chars).
bool is_bcrypt_hash(std::string_view hash);
// bcrypt verification through libxcrypt's crypt_rn (constant-time comparison of the result).
bool bcrypt_verify(std::string_view password, const std::string& hash);

// "Basic dXNlcjpwYXNz" -> {"user", "pass"}; nullopt for anything else.
std::optional<std::pair<std::string, std::string>> parse_basic_authorization(std::string_view header);

// Checks Authorization headers against basic_auth_users. bcrypt costs ~50 ms per check, so
// (like exporter-toolkit) a successful (user, password, hash) triple is remembered in memory, as its
// HMAC-SHA256 under a per-process random key, never the password itself;
// a wrong password always pays the full bcrypt cost, and so does an unknown user (against a
// dummy hash) so that user names cannot be told apart by timing.
class BasicAuthenticator {
 public:
  explicit BasicAuthenticator(std::map<std::string, std::string> users);
  bool enabled() const { return !users_.empty(); }
  bool check(const char* authorization_header);
  // What the cache holds (tests: that no credential is in it).
  std::set<std::string> cached() const {
    std::lock_guard lock(mu_);
    return verified_;
  }

 private:
  std::map<std::string, std::string> users_;
  mutable std::mutex mu_;
  std::set<std::string> verified_;  // HMAC-SHA256 of user '\0' password '\0' hash; bounded
};

}  // namespace rdma::exporter
