#include "exporter/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "exporter/text.h"

namespace rdma::exporter {
namespace {

// Formats one record as logfmt or JSON, escaping the message so each record is one line.
class StructuredFormatter final : public spdlog::formatter {
 public:
  explicit StructuredFormatter(bool json) : json_(json) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto secs = std::chrono::time_point_cast<std::chrono::milliseconds>(msg.time);
    std::time_t t = std::chrono::system_clock::to_time_t(msg.time);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[40];
    std::size_t n = std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    int ms = static_cast<int>(secs.time_since_epoch().count() % 1000);
    std::snprintf(ts + n, sizeof ts - n, ".%03dZ", ms);
    auto level = spdlog::level::to_string_view(msg.level);
    std::string_view text(msg.payload.data(), msg.payload.size());
    if (json_) {
      append(dest, "{\"ts\":\"");
      append(dest, ts);
      append(dest, "\",\"level\":\"");
      append(dest, std::string_view(level.data(), level.size()));
      append(dest, "\",\"msg\":\"");
      escape(dest, text);
      append(dest, "\"}\n");
    } else {
      append(dest, "ts=");
      append(dest, ts);
      append(dest, " level=");
      append(dest, std::string_view(level.data(), level.size()));
      append(dest, " msg=\"");
      escape(dest, text);
      append(dest, "\"\n");
    }
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<StructuredFormatter>(json_); }

 private:
  static void append(spdlog::memory_buf_t& d, std::string_view s) { d.append(s.data(), s.data() + s.size()); }
  // The message as a JSON string (logfmt quotes its values the same way): one line, valid UTF-8
  // whatever a peer or a fabric node put in a name the message quotes.
  static void escape(spdlog::memory_buf_t& d, std::string_view s) {
    std::string quoted;
    append_json_string(quoted, s);
    append(d, std::string_view(quoted).substr(1, quoted.size() - 2));
  }
  bool json_;
};

}  // namespace

LogSettings log_settings(const Options& options) {
  // spdlog's own names ("warn" and "error" included).
  const auto level = options.get_choice("log.level", {"debug", "info", "warn", "error"});
  return {spdlog::level::from_str(level), options.get_choice("log.format", {"logfmt", "json"}) == "json"};
}

void setup_logging(const LogSettings& settings) {
  auto logger = spdlog::get("rdma_exporter");
  if (!logger) {
    logger = spdlog::stderr_logger_mt("rdma_exporter");
    logger->flush_on(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  // The _mt sink swaps its formatter under its lock; the level is atomic.
  logger->set_formatter(std::make_unique<StructuredFormatter>(settings.json));
  logger->set_level(static_cast<spdlog::level::level_enum>(settings.level));
}

}  // namespace rdma::exporter
