// One table of options serves both the command line and the YAML file: flag
// --web.listen-address <-> YAML web.listen_address (a collector's settings: flag
// --collector.prober.max-peers <-> YAML collectors.prober.max_peers). Flags override the file.
// Every problem is reported with where it came from (the flag, or file:line:col and the key).
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rdma::exporter {

// Bad command line: the caller prints the message and the usage, exits non-zero.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Bad configuration value or file: the message names the file, line and key, or the flag.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The bound of the config and web config files (read with read_small_file): a prober peer list of
// tens of thousands of entries fits; a wrong path (a log) is refused instead of parsed.
inline constexpr std::size_t kMaxConfigFileBytes = 16u << 20;

enum class OptionType : std::uint8_t { kString, kBool, kInt, kDuration, kStringList, kYaml };

struct OptionSpec {
  std::string flag;           // without "--": "web.listen-address"
  OptionType type = OptionType::kString;
  std::string default_value;  // textual, parsed like a flag value; empty = unset
  std::string help;
  std::string yaml_path;      // derived from flag when empty: '-' -> '_' (yaml_key())
};

// The YAML spelling of a flag or of a part of one: '-' -> '_'.
std::string yaml_key(std::string_view flag);
// "file:line:col" of a node loaded from `file`, for error messages (`file` alone without a mark).
std::string yaml_position(const std::string& file, const YAML::Node& node);

using Duration = std::chrono::milliseconds;
using OptionValue =
    std::variant<std::monostate, std::string, bool, std::int64_t, Duration, std::vector<std::string>, YAML::Node>;

// Parses "1h2m3s", "500ms", "10s" (Prometheus' duration units ms, s, m, h, d).
std::optional<Duration> parse_duration(std::string_view s);

class Options {
 public:
  void declare(OptionSpec spec);
  const std::vector<OptionSpec>& specs() const { return specs_; }

  // Splits argv into raw values (checked by resolve()); --help and --version only set `help` and
  // `version`, the caller prints. Throws UsageError for an unknown flag, a missing value, a
  // positional argument or a kYaml option given as a flag. Remembers --config.file.
  struct CommandLine {
    std::map<std::string, std::string> values;  // flag -> raw value
    std::optional<std::string> config_file;
    bool help = false;
    bool version = false;
  };
  CommandLine parse_command_line(int argc, const char* const* argv) const;

  // Applies defaults, then the YAML file (if any), then the flags. Throws ConfigError.
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
  // Where the value came from ("default", "flag --x", "file:line:col"); where() says more.
  std::string origin(const std::string& flag) const;
  // The start of a message about the option's value, naming the key as the user wrote it, where
  // they wrote it: "file:line:col: key 'collectors.prober.max_peers'" for a value from the config
  // file (or the default), "flag --collector.prober.max-peers" for one from the command line.
  std::string where(const std::string& flag) const;
  // ConfigError "<where(flag)>: <message>".
  ConfigError error(const std::string& flag, const std::string& message) const;
  // Checked values: error() when the value is out of bounds.
  std::int64_t get_int(const std::string& flag, std::int64_t min, std::int64_t max) const;
  Duration get_positive_duration(const std::string& flag) const;
  // The value, which must be one of `choices` (e.g. auto, true, false).
  std::string get_choice(const std::string& flag, std::initializer_list<std::string_view> choices) const;
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
