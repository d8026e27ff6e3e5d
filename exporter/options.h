// One table of options serves both the command line and the YAML file: flag
// --collector.port.device-include <-> YAML collectors.port.device_include. Flags override the
// file. Every problem is reported with where it came from (flag, or file:line and key).
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace rdma::exporter {

// Bad command line: the caller prints the message and the usage, exits non-zero.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Bad configuration value or file: the message names the file, line and key.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class OptionType : std::uint8_t { kString, kBool, kInt, kDuration, kStringList, kYaml };

struct OptionSpec {
  std::string flag;           // without "--": "web.listen-address"
  OptionType type = OptionType::kString;
  std::string default_value;  // textual, parsed like a flag value; empty = unset
  std::string help;
  std::string yaml_path;      // derived from flag when empty: '-' -> '_'
};

using Duration = std::chrono::milliseconds;
using OptionValue =
    std::variant<std::monostate, std::string, bool, std::int64_t, Duration, std::vector<std::string>, YAML::Node>;

// Parses "1h2m3s", "500ms", "10s" (Prometheus' duration units ms, s, m, h, d).
std::optional<Duration> parse_duration(std::string_view s);

class Options {
 public:
  void declare(OptionSpec spec);
  const std::vector<OptionSpec>& specs() const { return specs_; }

  // Parses argv. Returns false when --help or --version was given (printed to stdout).
  // Throws UsageError for unknown flags or bad values. Remembers --config.file.
  struct CommandLine {
    std::map<std::string, std::string> values;  // flag -> raw value
    std::optional<std::string> config_file;
    bool help = false;
    bool version = false;
  };
  CommandLine parse_command_line(int argc, const char* const* argv) const;

  // Applies defaults, then the YAML file (if any), then the flags. Throws ConfigError/UsageError.
  void resolve(const CommandLine& cli);
  void resolve_yaml_text(const std::string& yaml, const std::string& origin, const CommandLine& cli);

  const OptionValue& get(const std::string& flag) const;
  std::string get_string(const std::string& flag) const;
  bool get_bool(const std::string& flag) const;
  std::int64_t get_int(const std::string& flag) const;
  Duration get_duration(const std::string& flag) const;
  std::vector<std::string> get_list(const std::string& flag) const;
  YAML::Node get_yaml(const std::string& flag) const;
  // The value as canonical text ("" when unset): two values render equal exactly when they are
  // equal, wherever they came from (flag, file, default). A reload compares collectors' settings so.
  std::string render(const std::string& flag) const;
  // Where the value came from ("default", "flag --x", "file:line"), for error messages.
  std::string origin(const std::string& flag) const;
  const std::string& config_file() const { return config_file_; }

  std::string usage(const std::string& program) const;

 private:
  const OptionSpec* find_flag(const std::string& flag) const;
  const OptionSpec* find_yaml(const std::string& path) const;
  void apply_yaml(const YAML::Node& node, const std::string& prefix, const std::string& file);
  void set_from_text(const OptionSpec& spec, const std::string& text, const std::string& origin);
  void set_from_yaml(const OptionSpec& spec, const YAML::Node& node, const std::string& origin);

  std::vector<OptionSpec> specs_;
  std::map<std::string, OptionValue> values_;
  std::map<std::string, std::string> origins_;
  std::string config_file_;
};

}  // namespace rdma::exporter
