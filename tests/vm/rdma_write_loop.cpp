// rdma_write_loop: a deterministic RDMA WRITE traffic source for the vm tests.
//
// In one process it opens two RDMA devices (default rxe0 and rxe1), creates an
// RC QP on each, connects them to each other over RoCE v2 (the IPv4-mapped
// GID of port 1), then posts N signaled RDMA WRITEs of SIZE bytes from A into
// a buffer registered on B, one at a time, waiting for each completion.
//
// With SIZE <= the path MTU (1024 here) each WRITE is one request packet from
// A to B and one ACK from B to A, so on an otherwise idle pair of ports:
//   A: sent_pkts += N, rcvd_pkts += N      B: rcvd_pkts += N, sent_pkts += N
// (retransmissions can only add to that).  It prints the sysfs hw_counters
// deltas it saw, for the test log; the assertions are the test's.
//
// usage: rdma_write_loop [devA] [devB] [iterations] [size] [hold [EXTRA_QPS] | pace INTERVAL_US]
// With "hold" it keeps its QPs (plus EXTRA_QPS more) open after the writes until a signal.
// With "pace" it posts one write every INTERVAL_US (absolute schedule) instead of back to back
// and prints the median, 10th and 90th percentile of post -> completion (busy-polled, steady
// clock): the prober's RTT reference at the prober's own probe rate (bench/prober/run.sh).
// RDMA_WRITE_LOOP_RETRY_CNT (0-7, default 7) sets the QPs' transport retry count. rxe (6.1) takes
// 7 for "retry forever" (with every packet lost: 347 retries in 30 s, none exceeded; with 3: the
// write fails with "transport retry counter exceeded"), so a test that wants a QP to run out of
// retries sets a lower one.
// exit: 0 = all N writes completed and B's buffer holds the last payload;
//       1 = a completion failed or the payload is wrong; 2 = setup error.
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <time.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace {

[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "rdma_write_loop: %s: %s\n", what, std::strerror(err));
  std::exit(2);
}

std::map<std::string, unsigned long long> read_hw_counters(const std::string& dev) {
  std::map<std::string, unsigned long long> m;
  const std::string dir = "/sys/class/infiniband/" + dev + "/ports/1/hw_counters";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || std::strcmp(e->d_name, "lifespan") == 0) continue;
      std::ifstream f(dir + "/" + e->d_name);
      unsigned long long v = 0;
      if (f >> v) m[e->d_name] = v;
    }
    closedir(d);
  }
  return m;
}

struct End {
  const char* name = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<char> buf;
  int gid_index = -1;
  ibv_gid gid{};
};

ibv_context* open_device(const char* name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) die("ibv_get_device_list", errno);
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i)
    if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  if (ctx == nullptr) {
    std::fprintf(stderr, "rdma_write_loop: device %s not found or not openable (%d devices)\n", name, n);
    std::exit(2);
  }
  return ctx;
}

// The first GID of port 1 that is an IPv4-mapped address (::ffff:a.b.c.d).
int ipv4_gid(ibv_context* ctx, ibv_gid* out) {
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx, 1, &pa); rc != 0) die("ibv_query_port", rc);
  static const unsigned char kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(ctx, 1, i, &g) != 0) continue;
    if (std::memcmp(g.raw, kV4Prefix, sizeof kV4Prefix) == 0) {
      *out = g;
      return i;
    }
  }
  return -1;
}

ibv_qp* create_rc_qp(const End& e) {
  ibv_qp_init_attr ia{};
  ia.send_cq = e.cq;
  ia.recv_cq = e.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(e.pd, &ia);
  if (qp == nullptr) die("ibv_create_qp", errno);
  return qp;
}

void setup(End& e, const char* name, size_t size) {
  e.name = name;
  e.ctx = open_device(name);
  e.pd = ibv_alloc_pd(e.ctx);
  if (e.pd == nullptr) die("ibv_alloc_pd", errno);
  e.cq = ibv_create_cq(e.ctx, 16, nullptr, nullptr, 0);
  if (e.cq == nullptr) die("ibv_create_cq", errno);
  e.buf.assign(size, 0);
  e.mr = ibv_reg_mr(e.pd, e.buf.data(), size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (e.mr == nullptr) die("ibv_reg_mr", errno);
  e.qp = create_rc_qp(e);
  e.gid_index = ipv4_gid(e.ctx, &e.gid);
  if (e.gid_index < 0) {
    std::fprintf(stderr, "rdma_write_loop: %s has no IPv4-mapped RoCE GID on port 1\n", name);
    std::exit(2);
  }
}

void connect(End& me, const End& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (int rc = ibv_modify_qp(me.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    die("ibv_modify_qp(INIT)", rc);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(me.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  if (int rc = ibv_modify_qp(me.qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    die("ibv_modify_qp(RTR)", rc);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  const char* retry = std::getenv("RDMA_WRITE_LOOP_RETRY_CNT");
  a.retry_cnt = static_cast<uint8_t>(retry ? std::clamp(std::atoi(retry), 0, 7) : 7);
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(me.qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    die("ibv_modify_qp(RTS)", rc);
}

void teardown(End& e) {
  ibv_destroy_qp(e.qp);
  ibv_dereg_mr(e.mr);
  ibv_destroy_cq(e.cq);
  ibv_dealloc_pd(e.pd);
  ibv_close_device(e.ctx);
}

}  // namespace

int main(int argc, char** argv) {
  const char* dev_a = argc > 1 ? argv[1] : "rxe0";
  const char* dev_b = argc > 2 ? argv[2] : "rxe1";
  const long iterations = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 1000;
  const size_t size = argc > 4 ? std::strtoul(argv[4], nullptr, 0) : 64;
  if (iterations <= 0 || size < 16) {
    std::fprintf(stderr, "usage: rdma_write_loop [devA] [devB] [iterations>0] [size>=16]\n");
    return 2;
  }

  const auto before_a = read_hw_counters(dev_a);
  const auto before_b = read_hw_counters(dev_b);
  End a, b;
  setup(a, dev_a, size);
  setup(b, dev_b, size);
  connect(a, b);
  connect(b, a);
  char ga[INET6_ADDRSTRLEN], gb[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, a.gid.raw, ga, sizeof ga);
  inet_ntop(AF_INET6, b.gid.raw, gb, sizeof gb);
  std::printf("%s qpn=0x%x gid[%d]=%s -> %s qpn=0x%x gid[%d]=%s\n", dev_a, a.qp->qp_num, a.gid_index, ga, dev_b,
              b.qp->qp_num, b.gid_index, gb);

  const bool pace = argc > 6 && std::strcmp(argv[5], "pace") == 0;
  const long interval_ns = pace ? std::strtol(argv[6], nullptr, 10) * 1000 : 0;
  std::vector<double> rtts;
  timespec due{};
  clock_gettime(CLOCK_MONOTONIC, &due);
  auto ns = [](const timespec& t) { return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec); };
  long done = 0;
  for (long i = 0; i < iterations; ++i) {
    if (pace) {
      due.tv_nsec += interval_ns;
      while (due.tv_nsec >= 1000000000L) due.tv_nsec -= 1000000000L, ++due.tv_sec;
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, nullptr);
    }
    timespec t0{}, t1{};
    std::snprintf(a.buf.data(), size, "write %ld", i);
    ibv_sge sge{reinterpret_cast<uintptr_t>(a.buf.data()), static_cast<uint32_t>(size), a.mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = static_cast<uint64_t>(i);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data());
    wr.wr.rdma.rkey = b.mr->rkey;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (int rc = ibv_post_send(a.qp, &wr, &bad)) die("ibv_post_send", rc);
    ibv_wc wc{};
    int n = 0;
    while ((n = ibv_poll_cq(a.cq, 1, &wc)) == 0) {
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (pace) rtts.push_back((ns(t1) - ns(t0)) / 1e3);
    if (n < 0 || wc.status != IBV_WC_SUCCESS) {
      std::fprintf(stderr, "rdma_write_loop: write %ld: completion error: %s\n", i,
                   n < 0 ? "ibv_poll_cq failed" : ibv_wc_status_str(wc.status));
      return 1;
    }
    ++done;
  }
  char expected[64];
  std::snprintf(expected, sizeof expected, "write %ld", iterations - 1);
  if (std::strncmp(b.buf.data(), expected, size) != 0) {
    std::fprintf(stderr, "rdma_write_loop: %s's buffer holds \"%.*s\", expected \"%s\"\n", dev_b,
                 static_cast<int>(size), b.buf.data(), expected);
    return 1;
  }
  std::printf("RDMA WRITE %zu B x %ld completed; %s's buffer holds \"%s\"\n", size, done, dev_b, b.buf.data());
  if (pace && !rtts.empty()) {
    std::sort(rtts.begin(), rtts.end());
    auto at = [&rtts](double q) { return rtts[static_cast<std::size_t>(q * static_cast<double>(rtts.size() - 1))]; };
    std::printf("post-to-completion every %ld us: n=%zu median=%.1f us p10=%.1f us p90=%.1f us\n", interval_ns / 1000,
                rtts.size(), at(0.5), at(0.1), at(0.9));
  }

  if (argc > 5 && std::strcmp(argv[5], "hold") == 0) {
    // A QP owner that stays (the workload collector's tests): EXTRA more QPs, alternately on A and
    // B, moved to INIT on port 1; then wait for a signal, whose default action ends the process
    // and with it every QP.
    const long extra = argc > 6 ? std::strtol(argv[6], nullptr, 10) : 0;
    for (long i = 0; i < extra; ++i) {
      ibv_qp* qp = create_rc_qp(i % 2 == 0 ? a : b);
      ibv_qp_attr qa{};
      qa.qp_state = IBV_QPS_INIT;
      qa.port_num = 1;
      qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
      if (int rc = ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("ibv_modify_qp(INIT)", rc);
    }
    std::printf("holding %ld QPs on %s and %s until a signal\n", extra + 2, dev_a, dev_b);
    std::fflush(stdout);
    for (;;) pause();
  }

  teardown(a);
  teardown(b);
  const auto after_a = read_hw_counters(dev_a);
  const auto after_b = read_hw_counters(dev_b);
  for (const auto& [dev, before, after] : {std::tuple{dev_a, &before_a, &after_a}, std::tuple{dev_b, &before_b, &after_b}}) {
    std::printf("%s hw_counters delta (sysfs):", dev);
    for (const auto& [k, v] : *after) {
      auto it = before->find(k);
      const unsigned long long v0 = it == before->end() ? 0 : it->second;
      if (v != v0) std::printf(" %s=+%llu", k.c_str(), v - v0);
    }
    std::printf("\n");
  }
  return 0;
}
