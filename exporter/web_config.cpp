#include "exporter/web_config.h"

#include <crypt.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "exporter/options.h"
#include "exporter/tls/openssl_api.h"
#include "exporter/yaml_util.h"
#include "sources/common/small_file.h"

namespace rdma::exporter {
namespace {

std::string scalar(const std::string& origin, const YAML::Node& n, const std::string& key) {
  if (n.IsNull()) return {};
  if (!n.IsScalar()) throw ConfigError(yaml_position(origin, n) + ": " + key + " must be a string");
  return n.Scalar();
}

std::string resolve_path(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/' || base_dir.empty()) return p;
  return base_dir + "/" + p;
}

int tls_version(const std::string& origin, const YAML::Node& n, const std::string& key) {
  std::string v = scalar(origin, n, key);
  if (v.empty()) return 0;
  if (v == "TLS10") return 0x0301;
  if (v == "TLS11") return 0x0302;
  if (v == "TLS12") return 0x0303;
  if (v == "TLS13") return 0x0304;
  throw ConfigError(yaml_position(origin, n) + ": " + key + ": unknown TLS version \"" + v +
                    "\" (use TLS10, TLS11, TLS12 or TLS13)");
}

ClientAuth client_auth(const std::string& origin, const YAML::Node& n) {
  std::string v = scalar(origin, n, "tls_server_config.client_auth_type");
  if (v.empty() || v == "NoClientCert") return ClientAuth::kNoClientCert;
  if (v == "RequestClientCert") return ClientAuth::kRequestClientCert;
  if (v == "RequireAnyClientCert") return ClientAuth::kRequireAnyClientCert;
  if (v == "VerifyClientCertIfGiven") return ClientAuth::kVerifyClientCertIfGiven;
  if (v == "RequireAndVerifyClientCert") return ClientAuth::kRequireAndVerifyClientCert;
  throw ConfigError(yaml_position(origin, n) + ": tls_server_config.client_auth_type: invalid value \"" + v +
                    "\" (NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, "
                    "RequireAndVerifyClientCert)");
}

void check_readable(const std::string& origin, const std::string& key, const std::string& path) {
  if (path.empty()) return;
  std::ifstream f(path);
  if (!f) throw ConfigError(origin + ": " + key + ": cannot read " + path + ": " + std::strerror(errno));
}

// Keys exporter-toolkit knows but this exporter does not implement: reject, never ignore.
bool toolkit_only_tls_key(const std::string& k) {
  return k == "cipher_suites" || k == "curve_preferences" || k == "prefer_server_cipher_suites" ||
         k == "client_allowed_sans" || k == "cert" || k == "key";
}

}  // namespace

WebConfig parse_web_config(const std::string& yaml, const std::string& origin, const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw ConfigError(yaml_position(origin, e.mark) + ": invalid YAML: " + e.msg);
  }
  WebConfig cfg;
  cfg.origin = origin;
  if (root.IsNull()) return cfg;
  if (!root.IsMap()) throw ConfigError(yaml_position(origin, root) + ": the web config must be a YAML mapping");
  try {
    for (const auto& kv : root) {
      if (!kv.first.IsScalar()) throw ConfigError(yaml_position(origin, kv.first) + ": keys must be strings");
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (key == "tls_server_config") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) throw ConfigError(yaml_position(origin, v) + ": tls_server_config must be a mapping");
        TlsServerConfig tls;
        YAML::Node auth_node, ca_node;
        for (const auto& t : v) {
          if (!t.first.IsScalar()) throw ConfigError(yaml_position(origin, t.first) + ": keys must be strings");
          const std::string k = t.first.Scalar();
          const std::string full = "tls_server_config." + k;
          if (k == "cert_file") tls.cert_file = resolve_path(base_dir, scalar(origin, t.second, full));
          else if (k == "key_file") tls.key_file = resolve_path(base_dir, scalar(origin, t.second, full));
          else if (k == "client_ca_file") {
            tls.client_ca_file = resolve_path(base_dir, scalar(origin, t.second, full));
            ca_node = t.second;
          } else if (k == "client_auth_type") {
            tls.client_auth = client_auth(origin, t.second);
            auth_node = t.second;
          } else if (k == "min_version") tls.min_version = tls_version(origin, t.second, full);
          else if (k == "max_version") tls.max_version = tls_version(origin, t.second, full);
          else if (toolkit_only_tls_key(k))
            throw ConfigError(yaml_position(origin, t.first) + ": " + full + " is not supported by rdma_exporter");
          else throw ConfigError(yaml_position(origin, t.first) + ": unknown key " + full);
        }
        const bool any = !tls.cert_file.empty() || !tls.key_file.empty() || !tls.client_ca_file.empty();
        if (!any) continue;  // exporter-toolkit: an empty TLS block means plain HTTP
        if (tls.cert_file.empty())
          throw ConfigError(yaml_position(origin, v) + ": tls_server_config.cert_file is required when TLS is configured");
        if (tls.key_file.empty())
          throw ConfigError(yaml_position(origin, v) + ": tls_server_config.key_file is required when TLS is configured");
        const bool verifies = tls.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                              tls.client_auth == ClientAuth::kRequireAndVerifyClientCert;
        if (verifies && tls.client_ca_file.empty())
          throw ConfigError(yaml_position(origin, auth_node) +
                            ": tls_server_config.client_auth_type verifies client certificates but "
                            "tls_server_config.client_ca_file is not set");
        if (!tls.client_ca_file.empty() && tls.client_auth == ClientAuth::kNoClientCert)
          throw ConfigError(yaml_position(origin, ca_node) +
                            ": tls_server_config.client_ca_file is set but client_auth_type is NoClientCert; "
                            "set client_auth_type (e.g. RequireAndVerifyClientCert)");
        if (tls.min_version && tls.max_version && tls.min_version > tls.max_version)
          throw ConfigError(yaml_position(origin, v) + ": tls_server_config.min_version is above max_version");
        cfg.tls = std::move(tls);
      } else if (key == "basic_auth_users") {
        if (v.IsNull()) continue;
        if (!v.IsMap()) throw ConfigError(yaml_position(origin, v) + ": basic_auth_users must be a mapping user: bcrypt-hash");
        for (const auto& u : v) {
          if (!u.first.IsScalar() || !u.second.IsScalar())
            throw ConfigError(yaml_position(origin, u.first) + ": basic_auth_users entries must be user: bcrypt-hash");
          const std::string user = u.first.Scalar();
          const std::string hash = u.second.Scalar();
          if (user.empty() || user.find(':') != std::string::npos)
            throw ConfigError(yaml_position(origin, u.first) + ": basic_auth_users: invalid user name \"" + user +
                              "\" (empty or contains ':')");
          if (!is_bcrypt_hash(hash))
            throw ConfigError(yaml_position(origin, u.second) + ": basic_auth_users." + user +
                              ": not a bcrypt hash (expected $2a$/$2b$/$2y$, e.g. from htpasswd -nBC 10)");
          if (!cfg.basic_auth_users.emplace(user, hash).second)
            throw ConfigError(yaml_position(origin, u.first) + ": basic_auth_users: duplicate user \"" + user + "\"");
        }
      } else if (key == "http_server_config" || key == "rate_limit") {
        throw ConfigError(yaml_position(origin, kv.first) + ": " + key + " is not supported by rdma_exporter");
      } else {
        throw ConfigError(yaml_position(origin, kv.first) + ": unknown key " + key +
                          " (expected tls_server_config, basic_auth_users)");
      }
    }
  } catch (const YAML::Exception& e) {
    throw ConfigError(yaml_position(origin, e.mark) + ": " + e.msg);
  }
  return cfg;
}

WebConfig load_web_config(const std::string& path) {
  auto file = read_small_file(path, kMaxConfigFileBytes);
  if (!file && file.sys_errno == EFBIG)
    throw ConfigError(path + ": web config file is larger than " + std::to_string(kMaxConfigFileBytes) + " bytes");
  if (!file) throw ConfigError(path + ": cannot open web config file: " + std::strerror(file.sys_errno));
  std::string dir;
  if (auto slash = path.rfind('/'); slash != std::string::npos) dir = path.substr(0, slash == 0 ? 1 : slash);
  WebConfig cfg = parse_web_config(file.value, path, dir);
  if (cfg.tls) {
    check_readable(path, "tls_server_config.cert_file", cfg.tls->cert_file);
    check_readable(path, "tls_server_config.key_file", cfg.tls->key_file);
    check_readable(path, "tls_server_config.client_ca_file", cfg.tls->client_ca_file);
  }
  return cfg;
}

bool is_bcrypt_hash(std::string_view h) {
  // $2b$NN$ + 22 salt chars + 31 hash chars, bcrypt's own base64 alphabet.
  if (h.size() != 60 || h[0] != '$' || h[1] != '2' || h[3] != '$' || h[6] != '$') return false;
  if (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') return false;
  if (h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9') return false;
  int cost = (h[4] - '0') * 10 + (h[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (std::size_t i = 7; i < h.size(); ++i) {
    char c = h[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '/'))
      return false;
  }
  return true;
}

bool bcrypt_verify(std::string_view password, const std::string& hash) {
  if (!is_bcrypt_hash(hash) || password.find('\0') != std::string_view::npos) return false;
  auto data = std::make_unique<crypt_data>();  // ~32 KiB: not on a worker's stack
  std::string pw(password);
  const char* out = crypt_rn(pw.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  if (!out) return false;
  std::size_t n = std::strlen(out);
  if (n != hash.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(out[i] ^ hash[i]);
  return diff == 0;
}

std::optional<std::pair<std::string, std::string>> parse_basic_authorization(std::string_view h) {
  constexpr std::string_view kPrefix = "Basic ";
  if (h.size() < kPrefix.size()) return std::nullopt;
  for (std::size_t i = 0; i < kPrefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(h[i])) != std::tolower(static_cast<unsigned char>(kPrefix[i])))
      return std::nullopt;
  h.remove_prefix(kPrefix.size());
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  while (!h.empty() && h.back() == ' ') h.remove_suffix(1);
  if (h.empty() || h.size() % 4 != 0 || h.size() > 4096) return std::nullopt;
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < h.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = h[i + j];
      if (c == '=') {
        // Padding only in the last quantum, only at its end.
        if (i + 4 != h.size() || j < 2) return std::nullopt;
        v[j] = 0;
        ++pad;
      } else {
        if (pad) return std::nullopt;
        v[j] = val(c);
        if (v[j] < 0) return std::nullopt;
      }
    }
    unsigned triple = (unsigned(v[0]) << 18) | (unsigned(v[1]) << 12) | (unsigned(v[2]) << 6) | unsigned(v[3]);
    out += static_cast<char>((triple >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((triple >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(triple & 0xff);
  }
  auto colon = out.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return std::pair{out.substr(0, colon), out.substr(colon + 1)};
}

BasicAuthenticator::BasicAuthenticator(std::map<std::string, std::string> users) : users_(std::move(users)) {}

namespace {
// The cache remembers a keyed hash of what was verified, never the password itself: a core dump
// or a read of the process' memory gives no credential. HMAC-SHA256 under a key drawn once per
// process (nothing persists it); nullopt when OpenSSL's module or its CSPRNG is unavailable, and
// then nothing is cached (every request pays bcrypt).
std::optional<std::string> verified_key(std::string_view user, std::string_view password, const std::string& hash) {
  struct Key {
    std::array<std::uint8_t, 32> bytes{};
    bool ok = false;
  };
  static const Key key = [] {
    Key k;
    try {
      k.ok = tls::openssl().random_bytes(k.bytes.data(), k.bytes.size());
    } catch (const std::exception&) {
      k.ok = false;
    }
    return k;
  }();
  if (!key.ok) return std::nullopt;
  std::string data;
  data.reserve(user.size() + password.size() + hash.size() + 2);
  data.append(user).append(1, '\0').append(password).append(1, '\0').append(hash);
  std::string mac(32, '\0');
  tls::openssl().hmac_sha256(key.bytes.data(), key.bytes.size(), reinterpret_cast<const std::uint8_t*>(data.data()),
                             data.size(), reinterpret_cast<std::uint8_t*>(mac.data()));
  explicit_bzero(data.data(), data.size());
  return mac;
}
}  // namespace

bool BasicAuthenticator::check(const char* header) {
  if (users_.empty()) return true;
  if (!header) return false;
  auto cred = parse_basic_authorization(header);
  if (!cred) return false;
  auto it = users_.find(cred->first);
  // A fixed, valid hash of a random string: unknown users cost one bcrypt like known ones.
  static const std::string kDummy = "$2b$10$3CJSNgox.Z7YrP9DtcOZB.QJXIQP3eTHvD9mWlpLYPfWkd5lqxueK";
  const std::string& hash = it == users_.end() ? kDummy : it->second;
  const std::optional<std::string> key = verified_key(cred->first, cred->second, hash);
  if (it != users_.end() && key) {
    std::lock_guard lock(mu_);
    if (verified_.count(*key)) return true;
  }
  bool ok = bcrypt_verify(cred->second, hash) && it != users_.end();
  if (ok && key) {
    std::lock_guard lock(mu_);
    if (verified_.size() >= 64) verified_.clear();
    verified_.insert(*key);
  }
  return ok;
}

}  // namespace rdma::exporter
