#include "sources/cgroup/pod_list.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <initializer_list>

namespace rdma::cgroup {
namespace {

// What a log line may show of a string from outside: printable ASCII, at most 200 characters.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

bool is_uid(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// "containerd://<hex>" -> "<hex>"; empty when it is not a scheme and a lowercase hex ID (the
// form the cgroup paths carry).
std::string container_id(std::string_view s) {
  auto sep = s.find("://");
  if (sep == std::string_view::npos || sep == 0) return {};
  auto id = s.substr(sep + 3);
  if (id.empty() || id.size() > 128) return {};
  for (char c : id)
    if (!((c >= 'a' && c <= 'f') || (c >= '0' && c <= '9'))) return {};
  return std::string(id);
}

using json = nlohmann::json;

// Walks the document once; keeps the path of object keys and array levels from the root.
class PodListSax {
 public:
  explicit PodListSax(PodList& out) : out_(out) {}

  std::string error;
  std::string kind, status_message;
  std::uint64_t status_code = 0;

  bool null() { return scalar(); }
  bool boolean(bool) { return scalar(); }
  bool number_integer(json::number_integer_t) { return scalar(); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (at({"code"})) status_code = v;
    return scalar();
  }
  bool number_float(json::number_float_t, const json::string_t&) { return scalar(); }
  bool binary(json::binary_t&) { return scalar(); }
  bool string(json::string_t& v) {
    if (!root_seen_) return fail("the document is not a JSON object");
    take(v);
    return true;
  }
  // The location checks look at where the object sits (before it is pushed, after it is popped).
  bool start_object(std::size_t) {
    if (root_seen_ && at({"items", "[]"})) {
      if (out_.pods.size() >= kMaxPods) return fail("more than " + std::to_string(kMaxPods) + " pods");
      pod_ = PodEntry{};
      in_pod_ = true;
    } else if (in_pod_ && container_list()) {
      if (pod_.containers.size() >= kMaxContainersPerPod)
        return fail("a pod with more than " + std::to_string(kMaxContainersPerPod) + " containers");
      container_ = PodContainer{};
      in_container_ = true;
    }
    return push(false);
  }
  bool end_object() {
    frames_.pop_back();
    if (in_container_ && container_list()) {
      if (!container_.id.empty()) pod_.containers.push_back(std::move(container_));
      in_container_ = false;
    } else if (in_pod_ && at({"items", "[]"})) {
      if (!pod_.uid.empty()) out_.pods.push_back(std::move(pod_));
      else ++out_.dropped;
      in_pod_ = false;
    }
    return true;
  }
  bool start_array(std::size_t) { return push(true); }
  bool end_array() {
    frames_.pop_back();
    return true;
  }
  bool key(json::string_t& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (error.empty()) error = "not valid JSON at byte " + std::to_string(position) + ": " + printable(e.what());
    return false;
  }

 private:
  struct Frame {
    bool array;
    std::string key;  // an object's current key
  };

  bool fail(std::string why) {
    if (error.empty()) error = std::move(why);
    return false;
  }
  bool scalar() { return root_seen_ ? true : fail("the document is not a JSON object"); }
  bool push(bool array) {
    if (!root_seen_ && array) return fail("the document is not a JSON object");
    root_seen_ = true;
    if (frames_.size() >= kMaxDepth) return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    frames_.push_back({array, {}});
    return true;
  }

  // Whether the current location (the frames, each array level as "[]") is `path`.
  bool at(std::initializer_list<std::string_view> path) const { return at_from(0, path); }
  bool at_from(std::size_t first, std::initializer_list<std::string_view> path) const {
    if (frames_.size() != first + path.size()) return false;
    std::size_t i = first;
    for (auto p : path) {
      const Frame& f = frames_[i++];
      if (f.array ? p != "[]" : p != f.key) return false;
    }
    return true;
  }
  // items[].status.<one of the three lists>[] (an entry's object)
  bool container_list() const {
    if (frames_.size() != 5 || !frames_[4].array) return false;
    if (!at_prefix_pod_status()) return false;
    const std::string& list = frames_[3].key;
    return list == "containerStatuses" || list == "initContainerStatuses" || list == "ephemeralContainerStatuses";
  }
  bool at_prefix_pod_status() const {
    return !frames_[0].array && frames_[0].key == "items" && frames_[1].array && !frames_[2].array &&
           frames_[2].key == "status" && !frames_[3].array;
  }

  void name(std::string& field, std::string& v, bool subdomain) {
    if (is_utf8(v) && (subdomain ? is_dns_subdomain(v) : is_dns_label(v))) field = std::move(v);
    else ++out_.dropped;
  }

  void take(std::string& v) {
    if (at({"kind"})) kind = printable(v);
    else if (at({"message"})) status_message = printable(v);
    else if (!in_pod_) return;
    else if (at({"items", "[]", "metadata", "uid"})) {
      if (is_uid(v)) pod_.uid = std::move(v);
    } else if (at({"items", "[]", "metadata", "name"})) name(pod_.name, v, true);
    else if (at({"items", "[]", "metadata", "namespace"})) name(pod_.namespace_name, v, false);
    else if (at({"items", "[]", "metadata", "annotations", "kubernetes.io/config.mirror"})) {
      if (is_uid(v)) pod_.mirror_uid = std::move(v);
      else ++out_.dropped;
    } else if (at({"items", "[]", "spec", "nodeName"})) name(pod_.node, v, true);
    else if (in_container_ && frames_.size() == 6 && !frames_[5].array && container_list_parent()) {
      if (frames_[5].key == "name") name(container_.name, v, false);
      else if (frames_[5].key == "containerID" && !v.empty()) {
        container_.id = container_id(v);
        if (container_.id.empty()) ++out_.dropped;
      }
    }
  }
  bool container_list_parent() const {
    const std::string& list = frames_[3].key;
    return frames_[4].array && at_prefix_pod_status() &&
           (list == "containerStatuses" || list == "initContainerStatuses" || list == "ephemeralContainerStatuses");
  }

  PodList& out_;
  std::vector<Frame> frames_;
  bool root_seen_ = false;
  bool in_pod_ = false, in_container_ = false;
  PodEntry pod_;
  PodContainer container_;
};

}  // namespace

bool is_dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s)
    if (!alnum(c) && c != '-') return false;
  return true;
}

bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  while (true) {
    auto dot = s.find('.');
    if (!is_dns_label(s.substr(0, dot))) return false;
    if (dot == std::string_view::npos) return true;
    s.remove_prefix(dot + 1);
  }
}

bool is_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n;
    std::uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) n = 1, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 2, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 3, cp = c & 0x07;
    else return false;
    if (s.size() - i - 1 < n) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr std::array<std::uint32_t, 4> kMin{0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

std::string decode_pod_list(std::string_view text, PodList& out) {
  out = {};
  PodListSax sax(out);
  const bool ok = json::sax_parse(text.begin(), text.end(), &sax);
  if (!ok) {
    out = {};
    return sax.error.empty() ? "not valid JSON" : sax.error;
  }
  if (sax.kind == "Status") {
    out = {};
    return "the API answered a Status, code " + std::to_string(sax.status_code) + ": " + sax.status_message;
  }
  if (sax.kind != "PodList") {
    out = {};
    return sax.kind.empty() ? "not a PodList (no kind)" : "not a PodList (kind " + sax.kind + ")";
  }
  return {};
}

}  // namespace rdma::cgroup
