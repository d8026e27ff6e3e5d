// The web config (exporter-toolkit format), bcrypt through libxcrypt, and basic-auth headers.
#include <crypt.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "exporter/options.h"
#include "exporter/web_config.h"

using namespace rdma::exporter;

namespace {
// A real bcrypt hash made by libxcrypt now (cost 4: fast), not a copied constant.
std::string make_hash(const std::string& password, const char* prefix = "$2b$") {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  REQUIRE(crypt_gensalt_rn(prefix, 4, nullptr, 0, salt, sizeof salt) != nullptr);
  crypt_data data{};
  const char* h = crypt_rn(password.c_str(), salt, &data, sizeof data);
  REQUIRE(h != nullptr);
  return h;
}

std::string error_of(const std::string& yaml) {
  try {
    parse_web_config(yaml, "web.yml", "/etc/rdma");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("web config: TLS, client auth and users are parsed, relative paths follow the file", "[web_config]") {
  auto hash = make_hash("s3cret");
  auto cfg = parse_web_config("tls_server_config:\n"
                              "  cert_file: tls/server.crt\n"
                              "  key_file: /abs/server.key\n"
                              "  client_ca_file: ca.crt\n"
                              "  client_auth_type: RequireAndVerifyClientCert\n"
                              "  min_version: TLS13\n"
                              "basic_auth_users:\n"
                              "  prometheus: " + hash + "\n",
                              "web.yml", "/etc/rdma");
  REQUIRE(cfg.tls);
  CHECK(cfg.tls->cert_file == "/etc/rdma/tls/server.crt");
  CHECK(cfg.tls->key_file == "/abs/server.key");
  CHECK(cfg.tls->client_ca_file == "/etc/rdma/ca.crt");
  CHECK(cfg.tls->client_auth == ClientAuth::kRequireAndVerifyClientCert);
  CHECK(cfg.tls->min_version == 0x0304);
  CHECK(cfg.basic_auth_users.at("prometheus") == hash);
}

TEST_CASE("web config: empty file and empty TLS block mean plain HTTP without auth", "[web_config]") {
  CHECK_FALSE(parse_web_config("", "web.yml", "").tls);
  CHECK_FALSE(parse_web_config("tls_server_config:\n  client_auth_type: NoClientCert\n", "w", "").tls);
  CHECK(parse_web_config("basic_auth_users: {}\n", "w", "").basic_auth_users.empty());
}

TEST_CASE("web config: every mistake is an error naming file, line and key", "[web_config]") {
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a.crt\n"), Catch::Contains("web.yml:2:3") &&
                                                                     Catch::Contains("key_file is required"));
  CHECK_THAT(error_of("tls_server_config:\n  key_file: a.key\n"), Catch::Contains("cert_file is required"));
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Sometimes\n"),
             Catch::Contains("web.yml:4:21") && Catch::Contains("client_auth_type: invalid value \"Sometimes\""));
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: VerifyClientCertIfGiven\n"),
             Catch::Contains("client_ca_file is not set"));
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n"),
             Catch::Contains("client_auth_type is NoClientCert"));
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\n"),
             Catch::Contains("web.yml:4:3") && Catch::Contains("cipher_suites is not supported"));
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: SSL3\n"),
             Catch::Contains("unknown TLS version \"SSL3\""));
  CHECK_THAT(error_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n"),
             Catch::Contains("min_version is above max_version"));
  CHECK_THAT(error_of("tls_server_config:\n  cert_fle: a\n"), Catch::Contains("unknown key tls_server_config.cert_fle"));
  CHECK_THAT(error_of("basic_auth_users:\n  bob: plaintext\n"),
             Catch::Contains("web.yml:2:8") && Catch::Contains("basic_auth_users.bob: not a bcrypt hash"));
  CHECK_THAT(error_of("basic_auth_users:\n  bob: $1$abc$def\n"), Catch::Contains("not a bcrypt hash"));
  CHECK_THAT(error_of("basic_auth_users: [bob]\n"), Catch::Contains("must be a mapping"));
  CHECK_THAT(error_of("basic_auth_user:\n  bob: x\n"), Catch::Contains("unknown key basic_auth_user"));
  CHECK_THAT(error_of("http_server_config:\n  http2: false\n"), Catch::Contains("http_server_config is not supported"));
  CHECK_THAT(error_of("tls_server_config: [\n"), Catch::Contains("invalid YAML"));
  CHECK_THAT(error_of("- a\n- b\n"), Catch::Contains("must be a YAML mapping"));
}

TEST_CASE("web config: load checks that the referenced files are readable", "[web_config]") {
  auto dir = std::filesystem::temp_directory_path() / ("webcfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "web.yml") << "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n";
  try {
    load_web_config((dir / "web.yml").string());
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cert_file: cannot read " + (dir / "missing.crt").string()));
  }
  CHECK_THROWS_WITH(load_web_config((dir / "nope.yml").string()), Catch::Contains("cannot open web config file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("bcrypt: $2b$ and $2y$ hashes verify through libxcrypt", "[web_config][bcrypt]") {
  auto b = make_hash("s3cret", "$2b$");
  CHECK(is_bcrypt_hash(b));
  CHECK(bcrypt_verify("s3cret", b));
  CHECK_FALSE(bcrypt_verify("s3creT", b));
  CHECK_FALSE(bcrypt_verify("", b));
  // htpasswd -nbBC 10 (Apache's $2y$): computed once and kept; libxcrypt must accept it.
  const std::string y = "$2y$10$X6rw/.ahNk.HbPsVsBzY5.usAZ3sT1s2nuSEjzu/8ie/NiD.X/VuK";
  CHECK(is_bcrypt_hash(y));
  CHECK(bcrypt_verify("secret", y));
  CHECK_FALSE(bcrypt_verify("Secret", y));
  CHECK_FALSE(bcrypt_verify(std::string("secret\0x", 8), y));
  CHECK_FALSE(is_bcrypt_hash("$2b$03$X6rw/.ahNk.HbPsVsBzY5.usAZ3sT1s2nuSEjzu/8ie/NiD.X/VuK"));  // cost < 4
  CHECK_FALSE(is_bcrypt_hash(y.substr(0, 59)));
}

TEST_CASE("basic auth: header decoding and the authenticator", "[web_config][auth]") {
  auto cred = parse_basic_authorization("Basic cHJvbWV0aGV1czpzM2NyZXQ=");  // prometheus:s3cret
  REQUIRE(cred);
  CHECK(cred->first == "prometheus");
  CHECK(cred->second == "s3cret");
  auto colon = parse_basic_authorization("basic dTphOmI=");  // u:a:b -> password "a:b"
  REQUIRE(colon);
  CHECK(colon->second == "a:b");
  CHECK_FALSE(parse_basic_authorization("Bearer abc"));
  CHECK_FALSE(parse_basic_authorization("Basic !!!!"));
  CHECK_FALSE(parse_basic_authorization("Basic dXNlcg=="));  // "user": no colon
  CHECK_FALSE(parse_basic_authorization("Basic dXN=lcg="));
  CHECK_FALSE(parse_basic_authorization("Basic "));

  BasicAuthenticator auth({{"prometheus", make_hash("s3cret")}});
  CHECK(auth.enabled());
  CHECK_FALSE(auth.check(nullptr));
  CHECK_FALSE(auth.check("Basic cHJvbWV0aGV1czp3cm9uZw=="));  // prometheus:wrong
  CHECK_FALSE(auth.check("Basic b3RoZXI6czNjcmV0"));          // other:s3cret
  CHECK(auth.check("Basic cHJvbWV0aGV1czpzM2NyZXQ="));
  CHECK(auth.check("Basic cHJvbWV0aGV1czpzM2NyZXQ="));  // cached
  // The cache holds a keyed hash (32 bytes of HMAC-SHA256), neither the password nor the user.
  REQUIRE(auth.cached().size() == 1);
  const std::string key = *auth.cached().begin();
  CHECK(key.size() == 32);
  CHECK(key.find("s3cret") == std::string::npos);
  CHECK(key.find("prometheus") == std::string::npos);
  CHECK(BasicAuthenticator({{"prometheus", make_hash("s3cret")}}).check("Basic cHJvbWV0aGV1czpzM2NyZXQ="));
  CHECK_FALSE(BasicAuthenticator({}).enabled());
  CHECK(BasicAuthenticator({}).check(nullptr));
}
