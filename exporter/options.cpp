#include "exporter/options.h"

#include "exporter/yaml_util.h"
#include "sources/common/small_file.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>

namespace rdma::exporter {
namespace {

// The origin of a value given on the command line: "flag --<flag>".
constexpr std::string_view kFlagOrigin = "flag --";

// Options::where() of a value set from `origin`.
std::string describe(const OptionSpec& spec, const std::string& origin) {
  if (origin.starts_with(kFlagOrigin)) return origin;
  return origin + ": key '" + spec.yaml_path + "'";
}

std::optional<bool> parse_bool(std::string_view s) {
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  return std::nullopt;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string_view type_word(OptionType t) {
  switch (t) {
    case OptionType::kString: return "a string";
    case OptionType::kBool: return "true or false";
    case OptionType::kInt: return "an integer";
    case OptionType::kDuration: return "a duration such as 10s or 500ms";
    case OptionType::kStringList: return "a list of strings";
    case OptionType::kYaml: return "a YAML structure";
  }
  return "a value";
}

}  // namespace

std::string yaml_key(std::string_view flag) {
  std::string p(flag);
  for (auto& c : p)
    if (c == '-') c = '_';
  return p;
}

std::optional<Duration> parse_duration(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::int64_t total_ms = 0;
  while (!s.empty()) {
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || n < 0) return std::nullopt;
    s.remove_prefix(static_cast<std::size_t>(p - s.data()));
    std::int64_t unit;
    if (s.starts_with("ms")) unit = 1, s.remove_prefix(2);
    else if (s.starts_with("s")) unit = 1000, s.remove_prefix(1);
    else if (s.starts_with("m")) unit = 60'000, s.remove_prefix(1);
    else if (s.starts_with("h")) unit = 3'600'000, s.remove_prefix(1);
    else if (s.starts_with("d")) unit = 86'400'000, s.remove_prefix(1);
    else return std::nullopt;
    if (n > (INT64_MAX / unit) - total_ms / unit) return std::nullopt;
    total_ms += n * unit;
  }
  return Duration(total_ms);
}

void Options::declare(OptionSpec spec) {
  if (spec.yaml_path.empty()) spec.yaml_path = yaml_key(spec.flag);
  specs_.push_back(std::move(spec));
}

const OptionSpec* Options::find_flag(const std::string& flag) const {
  for (const auto& s : specs_)
    if (s.flag == flag) return &s;
  return nullptr;
}

const OptionSpec* Options::find_yaml(const std::string& path) const {
  for (const auto& s : specs_)
    if (s.yaml_path == path) return &s;
  return nullptr;
}

Options::CommandLine Options::parse_command_line(int argc, const char* const* argv) const {
  CommandLine cli;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      cli.help = true;
      continue;
    }
    if (arg == "--version") {
      cli.version = true;
      continue;
    }
    if (!arg.starts_with("--")) throw UsageError("unexpected argument '" + arg + "'");
    arg = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (arg == "config.file") {
      if (!value) {
        if (i + 1 >= argc) throw UsageError("flag --config.file needs a value");
        value = argv[++i];
      }
      cli.config_file = *value;
      continue;
    }
    const OptionSpec* spec = find_flag(arg);
    if (!spec && arg.starts_with("no-")) {
      // --no-<bool flag> sets it false, as kingpin (node_exporter) does.
      spec = find_flag(arg.substr(3));
      if (!spec || spec->type != OptionType::kBool || value)
        throw UsageError("unknown flag --" + arg);
      cli.values[spec->flag] = "false";
      continue;
    }
    if (!spec) throw UsageError("unknown flag --" + arg);
    if (spec->type == OptionType::kYaml) throw UsageError("--" + arg + " can only be set in the config file");
    if (!value) {
      if (spec->type == OptionType::kBool) {
        value = "true";
      } else {
        if (i + 1 >= argc) throw UsageError("flag --" + arg + " needs a value");
        value = argv[++i];
      }
    }
    cli.values[spec->flag] = *value;
  }
  return cli;
}

void Options::set_from_text(const OptionSpec& spec, const std::string& text, const std::string& origin) {
  auto fail = [&]() {
    throw ConfigError(describe(spec, origin) + ": invalid value '" + text + "', expected " +
                      std::string(type_word(spec.type)));
  };
  OptionValue v;
  switch (spec.type) {
    case OptionType::kString: v = text; break;
    case OptionType::kBool: {
      auto b = parse_bool(text);
      if (!b) fail();
      v = *b;
      break;
    }
    case OptionType::kInt: {
      std::int64_t n = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || p != text.data() + text.size()) fail();
      v = n;
      break;
    }
    case OptionType::kDuration: {
      auto d = parse_duration(text);
      if (!d) fail();
      v = *d;
      break;
    }
    case OptionType::kStringList: v = split_list(text); break;
    case OptionType::kYaml: v = YAML::Load(text); break;
  }
  values_[spec.flag] = std::move(v);
  origins_[spec.flag] = origin;
}

void Options::set_from_yaml(const OptionSpec& spec, const YAML::Node& node, const std::string& origin) {
  auto fail = [&]() { throw ConfigError(describe(spec, origin) + ": expected " + std::string(type_word(spec.type))); };
  if (spec.type == OptionType::kYaml) {
    values_[spec.flag] = YAML::Clone(node);
    origins_[spec.flag] = origin;
    return;
  }
  if (spec.type == OptionType::kStringList) {
    if (node.IsScalar()) {
      set_from_text(spec, node.Scalar(), origin);
      return;
    }
    if (!node.IsSequence()) fail();
    std::vector<std::string> list;
    for (const auto& item : node) {
      if (!item.IsScalar()) fail();
      list.push_back(item.Scalar());
    }
    values_[spec.flag] = std::move(list);
    origins_[spec.flag] = origin;
    return;
  }
  if (!node.IsScalar()) fail();
  set_from_text(spec, node.Scalar(), origin);
}

void Options::apply_yaml(const YAML::Node& node, const std::string& prefix, const std::string& file) {
  if (!node.IsMap()) {
    throw ConfigError(yaml_position(file, node) + ": " + (prefix.empty() ? std::string("top level") : "key '" + prefix + "'") +
                      ": expected a mapping");
  }
  for (const auto& kv : node) {
    // A complex ("? [a, b]") or null key: as<std::string>() would throw YAML::BadConversion,
    // which is not a ConfigError and names no file or line.
    if (!kv.first.IsScalar()) throw ConfigError(yaml_position(file, kv.first) + ": keys must be plain strings");
    std::string key = kv.first.as<std::string>();
    std::string path = prefix.empty() ? key : prefix + "." + key;
    if (const OptionSpec* spec = find_yaml(path)) {
      set_from_yaml(*spec, kv.second, yaml_position(file, kv.second));
      continue;
    }
    // A section such as "collectors.port" is valid when some option lives beneath it.
    bool is_section = false;
    for (const auto& s : specs_)
      if (s.yaml_path.starts_with(path + ".")) is_section = true;
    if (!is_section) throw ConfigError(yaml_position(file, kv.first) + ": unknown key '" + path + "'");
    if (kv.second.IsNull()) continue;  // "port:" with nothing below
    apply_yaml(kv.second, path, file);
  }
}

void Options::resolve(const CommandLine& cli) {
  if (!cli.config_file) {
    resolve_yaml_text("", "", cli);
    return;
  }
  auto file = read_small_file(*cli.config_file, kMaxConfigFileBytes);
  if (!file && file.sys_errno == EFBIG)
    throw ConfigError(*cli.config_file + ": config file is larger than " + std::to_string(kMaxConfigFileBytes) + " bytes");
  if (!file) throw ConfigError(*cli.config_file + ": cannot open config file: " + std::strerror(file.sys_errno));
  resolve_yaml_text(file.value, *cli.config_file, cli);
}

void Options::resolve_yaml_text(const std::string& yaml, const std::string& origin, const CommandLine& cli) {
  values_.clear();
  origins_.clear();
  config_file_ = origin;
  for (const auto& s : specs_)
    if (!s.default_value.empty()) set_from_text(s, s.default_value, "default");
  if (!origin.empty()) {
    YAML::Node root;
    try {
      root = YAML::Load(yaml);
    } catch (const YAML::Exception& e) {
      throw ConfigError(yaml_position(origin, e.mark) + ": invalid YAML: " + e.msg);
    }
    if (!root.IsNull()) apply_yaml(root, "", origin);
  }
  for (const auto& [flag, value] : cli.values) set_from_text(*find_flag(flag), value, std::string(kFlagOrigin) + flag);
}

const OptionValue& Options::get(const std::string& flag) const {
  static const OptionValue kUnset;
  auto it = values_.find(flag);
  return it == values_.end() ? kUnset : it->second;
}

std::string Options::get_string(const std::string& flag) const {
  auto* s = std::get_if<std::string>(&get(flag));
  return s ? *s : std::string();
}
bool Options::get_bool(const std::string& flag) const {
  auto* b = std::get_if<bool>(&get(flag));
  return b && *b;
}
std::int64_t Options::get_int(const std::string& flag) const {
  auto* n = std::get_if<std::int64_t>(&get(flag));
  return n ? *n : 0;
}
Duration Options::get_duration(const std::string& flag) const {
  auto* d = std::get_if<Duration>(&get(flag));
  return d ? *d : Duration(0);
}
std::vector<std::string> Options::get_list(const std::string& flag) const {
  auto* l = std::get_if<std::vector<std::string>>(&get(flag));
  return l ? *l : std::vector<std::string>{};
}
YAML::Node Options::get_yaml(const std::string& flag) const {
  auto* y = std::get_if<YAML::Node>(&get(flag));
  return y ? *y : YAML::Node();
}
std::string Options::render(const std::string& flag) const {
  // Length-prefixed pieces: no value can be mistaken for another (a list item with a comma, a
  // string that looks like a YAML dump).
  auto piece = [](std::string_view s) { return std::to_string(s.size()) + ":" + std::string(s); };
  struct Render {
    decltype(piece)& p;
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(const std::string& s) const { return "s" + p(s); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t n) const { return "i" + std::to_string(n); }
    std::string operator()(Duration d) const { return "d" + std::to_string(d.count()); }
    std::string operator()(const std::vector<std::string>& l) const {
      std::string out = "l" + std::to_string(l.size());
      for (const auto& item : l) out += "," + p(item);
      return out;
    }
    std::string operator()(const YAML::Node& n) const {
      YAML::Emitter e;
      e.SetMapFormat(YAML::Flow);
      e.SetSeqFormat(YAML::Flow);
      e << n;
      return "y" + p(e.c_str());
    }
  };
  return std::visit(Render{piece}, get(flag));
}

std::string Options::origin(const std::string& flag) const {
  auto it = origins_.find(flag);
  return it == origins_.end() ? "default" : it->second;
}

std::string Options::where(const std::string& flag) const {
  const OptionSpec* spec = find_flag(flag);
  if (!spec) throw std::logic_error("option --" + flag + " is not declared");
  return describe(*spec, origin(flag));
}

ConfigError Options::error(const std::string& flag, const std::string& message) const {
  return ConfigError(where(flag) + ": " + message);
}

std::int64_t Options::get_int(const std::string& flag, std::int64_t min, std::int64_t max) const {
  const auto v = get_int(flag);
  if (v < min || v > max)
    throw error(flag, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                          std::to_string(v));
  return v;
}

Duration Options::get_positive_duration(const std::string& flag) const {
  const auto d = get_duration(flag);
  if (d.count() <= 0) throw error(flag, "must be a positive duration, got " + std::to_string(d.count()) + "ms");
  return d;
}

std::string Options::get_choice(const std::string& flag, std::initializer_list<std::string_view> choices) const {
  std::string v = get_string(flag);
  std::string list;  // "auto, true or false"
  std::size_t left = choices.size();
  for (auto c : choices) {
    if (v == c) return v;
    list += std::string(c) + (--left > 1 ? ", " : left == 1 ? " or " : "");
  }
  throw error(flag, "must be " + list + ", got '" + v + "'");
}

std::string Options::usage(const std::string& program) const {
  std::ostringstream out;
  out << "usage: " << program << " [<flags>]\n\nFlags:\n"
      << "  -h, --help                 Show this help.\n"
      << "      --version              Show the version.\n"
      << "      --config.file=PATH     YAML configuration file; flags override it.\n";
  for (const auto& s : specs_) {
    if (s.type == OptionType::kYaml) continue;
    std::string left = "      --" + s.flag;
    if (s.type == OptionType::kBool) left = "      --[no-]" + s.flag;
    else left += "=" + std::string(s.type == OptionType::kDuration ? "DURATION" : "VALUE");
    out << left;
    if (left.size() < 48) out << std::string(48 - left.size(), ' ');
    else out << "\n" << std::string(48, ' ');
    out << s.help;
    if (!s.default_value.empty()) out << " (default: " << s.default_value << ")";
    out << "  [yaml: " << s.yaml_path << "]\n";
  }
  return out.str();
}

}  // namespace rdma::exporter
