#include <catch2/catch.hpp>

#include "collectors/hw_counters/wrap_extender.h"

using rdma::collectors::hw_counters::WrapExtender;

TEST_CASE("32-bit counters become monotonic 64-bit totals across wraps") {
  WrapExtender w;
  const WrapExtender::Key k{"mlx5_0", "1", "rx_write_requests"};
  CHECK(w.extend(k, 32, 4294967000u) == 4294967000u);  // first value: as is
  CHECK(w.extend(k, 32, 4294967295u) == 4294967295u);
  CHECK(w.extend(k, 32, 100) == 4294967296u + 100);     // wrapped once
  CHECK(w.wraps(k) == 1);
  CHECK(w.extend(k, 32, 100) == 4294967296u + 100);     // unchanged is not a wrap
  CHECK(w.extend(k, 32, 5) == 2 * 4294967296u + 5);     // second wrap
  CHECK(w.wraps(k) == 2);
}

TEST_CASE("series are independent and 64-bit counters pass through") {
  WrapExtender w;
  const WrapExtender::Key a{"mlx5_0", "1", "out_of_buffer"}, b{"mlx5_0", "2", "out_of_buffer"};
  w.extend(a, 32, 10);
  w.extend(b, 32, 10);
  CHECK(w.extend(a, 32, 1) == 4294967297u);
  CHECK(w.extend(b, 32, 11) == 11);
  const WrapExtender::Key c{"mlx5_0", "1", "np_cnp_sent"};
  CHECK(w.extend(c, 64, 18446744073709551615ull) == 18446744073709551615ull);
  CHECK(w.extend(c, 64, 3) == 3);  // 64-bit: no state, a drop is a reset
  CHECK(w.wraps(c) == 0);
}

TEST_CASE("a value wider than the counter turns the series into pass-through") {
  WrapExtender w;
  const WrapExtender::Key k{"mlx5_0", "1", "duplicate_request"};
  CHECK(w.extend(k, 32, 7) == 7);
  CHECK(w.extend(k, 32, 4294967296ull + 9) == 4294967296ull + 9);
  CHECK(w.extend(k, 32, 3) == 3);  // no longer treated as a wrap
  CHECK(w.wraps(k) == 0);
}

TEST_CASE("state of vanished devices and ports is dropped") {
  WrapExtender w;
  const WrapExtender::Key k{"mlx5_0", "1", "out_of_sequence"}, d{"mlx5_1", "", "vport_out_of_sequence"};
  w.extend(k, 32, 50);
  w.extend(k, 32, 1);
  w.extend(d, 32, 2);
  CHECK(w.size() == 2);
  w.retain({WrapExtender::live_key("mlx5_1", "")});
  CHECK(w.size() == 1);
  CHECK(w.wraps(k) == 0);
  CHECK(w.extend(k, 32, 1) == 1);  // starts again at the raw value
}

TEST_CASE("inferred width: the smallest of 8/16/32 holding the values seen, wraps from the upper half only") {
  WrapExtender w;
  const WrapExtender::Key k8{"ionic_0", "1", "a"}, k16{"ionic_0", "1", "b"}, k32{"ionic_0", "1", "c"},
      k64{"ionic_0", "1", "d"}, low{"ionic_0", "1", "e"};
  CHECK(w.extend_inferred(k8, 200) == 200);
  CHECK(w.extend_inferred(k8, 5) == 256 + 5);
  CHECK(w.wraps(k8) == 1);
  CHECK(w.extend_inferred(k8, 130) == 256 + 130);
  CHECK(w.extend_inferred(k8, 0) == 512);

  CHECK(w.extend_inferred(k16, 300) == 300);
  CHECK(w.extend_inferred(k16, 40000) == 40000);
  CHECK(w.extend_inferred(k16, 1) == 65536 + 1);

  CHECK(w.extend_inferred(k32, 3000000000u) == 3000000000u);
  CHECK(w.extend_inferred(k32, 2) == 4294967296ull + 2);

  CHECK(w.extend_inferred(k64, 4294967296ull) == 4294967296ull);  // above 32 bits: passed through
  CHECK(w.extend_inferred(k64, 3) == 3);                          // a reset, left to Prometheus
  CHECK(w.extend_inferred(k64, 200) == 200);
  CHECK(w.extend_inferred(k64, 1) == 1);
  CHECK(w.wraps(k64) == 0);

  CHECK(w.extend_inferred(low, 100) == 100);  // lower half of 8 bits
  CHECK(w.extend_inferred(low, 2) == 2);      // a reset, not a wrap
  CHECK(w.wraps(low) == 0);
}
