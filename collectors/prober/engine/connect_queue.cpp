#include "collectors/prober/engine/connect_queue.h"

#include <algorithm>

namespace rdma::collectors::prober {

void HandshakeQueue::push(HandshakeJob job) {
  auto& q = peers_[key(job.kind == HandshakeJob::Kind::kConnect ? job.connect.peer : job.peer)];
  (job.kind == HandshakeJob::Kind::kPair ? q.pairs : q.connects).push_back(std::move(job));
}

std::optional<HandshakeJob> HandshakeQueue::take_from(HandshakeJob::Kind kind) {
  if (peers_.empty()) return std::nullopt;
  // The peers after the cursor, then from the start up to and including it.
  auto it = peers_.upper_bound(cursor_);
  for (std::size_t n = 0; n < peers_.size(); ++n, ++it) {
    if (it == peers_.end()) it = peers_.begin();
    auto& q = it->second;
    auto& jobs = kind == HandshakeJob::Kind::kPair ? q.pairs : q.connects;
    if (q.running || jobs.empty()) continue;
    HandshakeJob job = std::move(jobs.front());
    jobs.pop_front();
    q.running = true;
    ++running_;
    cursor_ = it->first;
    return job;
  }
  return std::nullopt;
}

std::optional<HandshakeJob> HandshakeQueue::take() {
  if (running_ >= concurrency_) return std::nullopt;
  if (auto job = take_from(HandshakeJob::Kind::kPair)) return job;
  return take_from(HandshakeJob::Kind::kConnect);
}

std::vector<HandshakeJob> HandshakeQueue::done(const std::string& key, bool unreachable) {
  std::vector<HandshakeJob> failed;
  auto it = peers_.find(key);
  if (it == peers_.end()) return failed;
  auto& q = it->second;
  if (q.running) q.running = false, --running_;
  if (unreachable) {
    failed.assign(std::make_move_iterator(q.connects.begin()), std::make_move_iterator(q.connects.end()));
    q.connects.clear();
  }
  if (q.pairs.empty() && q.connects.empty()) peers_.erase(it);  // a peer gone leaves nothing behind
  return failed;
}

void HandshakeQueue::drop_connect(std::uint64_t link) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    auto& q = it->second;
    std::erase_if(q.connects, [link](const HandshakeJob& j) { return j.id == link; });
    if (!q.running && q.pairs.empty() && q.connects.empty()) it = peers_.erase(it);
    else ++it;
  }
}

std::size_t HandshakeQueue::queued() const {
  std::size_t n = 0;
  for (const auto& [k, q] : peers_) n += q.pairs.size() + q.connects.size();
  return n;
}

}  // namespace rdma::collectors::prober
