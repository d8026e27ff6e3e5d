#include <catch2/catch.hpp>
#include <memory>
#include <zlib.h>

#include "exporter/exposition.h"

using namespace rdma::exporter;

TEST_CASE("u64 counters are written as exact integers") {
  MetricSink s;
  s.counter("x_total", "help", {{"device", "mlx5_0"}}, 18446744073709551615ull);
  s.counter("x_total", "help", {{"device", "mlx5_1"}}, 9007199254740993ull);
  std::string out;
  write_text(s.families(), out);
  CHECK(out ==
        "# HELP x_total help\n# TYPE x_total counter\n"
        "x_total{device=\"mlx5_0\"} 18446744073709551615\n"
        "x_total{device=\"mlx5_1\"} 9007199254740993\n");
}

TEST_CASE("doubles round-trip and special values follow the text format") {
  std::string out;
  append_double(out, 0.1);
  CHECK(out == "0.1");
  out.clear();
  append_double(out, 1.8446744073709552e19);
  CHECK(out == "18446744073709551616");  // shortest form that reads back as the same double
  out.clear();
  append_double(out, std::numeric_limits<double>::infinity());
  CHECK(out == "+Inf");
  out.clear();
  append_double(out, std::nan(""));
  CHECK(out == "NaN");
}

TEST_CASE("label values and help are escaped") {
  MetricSink s;
  s.gauge("g", "a \\ b\nc", {{"counter", "SwLinkUp,32"}, {"desc", "a \"q\" \\ \n"}}, 1);
  std::string out;
  write_text(s.families(), out);
  CHECK(out ==
        "# HELP g a \\\\ b\\nc\n# TYPE g gauge\n"
        "g{counter=\"SwLinkUp,32\",desc=\"a \\\"q\\\" \\\\ \\n\"} 1\n");
}

// A sample holds a view of its set; the sink keeps the set's rendering alive, also across append().
TEST_CASE("samples against a label set are written after the set and the sink they came from are gone") {
  MetricSink out;
  {
    MetricSink part;
    auto set = std::make_unique<LabelSet>(Labels{{"device", "mlx5_0"}, {"port", "1"}});
    part.counter(*set, "a_total", "A.", 1);
    part.gauge(*set, "b", "B.", 2, "method", "pread");
    set = std::make_unique<LabelSet>(Labels{{"device", "mlx5_1"}});
    part.counter(*set, "a_total", "A.", 3);
    set.reset();
    out.append(std::move(part));
  }
  std::string text;
  write_text(out.families(), text);
  CHECK(text ==
        "# HELP a_total A.\n# TYPE a_total counter\n"
        "a_total{device=\"mlx5_0\",port=\"1\"} 1\na_total{device=\"mlx5_1\"} 3\n"
        "# HELP b B.\n# TYPE b gauge\nb{device=\"mlx5_0\",port=\"1\",method=\"pread\"} 2\n");
}

TEST_CASE("a label set is written as its labels would be, escaped, with the sample's extra label last") {
  const LabelSet set(Labels{{"device", "mlx5_0"}, {"desc", "a \"q\" \\ \n"}});
  CHECK(set.text() == "device=\"mlx5_0\",desc=\"a \\\"q\\\" \\\\ \\n\"");
  MetricSink by_set, by_labels;
  by_set.counter(set, "x_total", "h", 18446744073709551615ull);
  by_set.gauge(set, "g", "h", 0.5, "counter", "SwLinkUp,32");
  by_set.gauge_u64(LabelSet(), "n", "h", 3, "method", "open");
  by_labels.counter("x_total", "h", set.labels(), 18446744073709551615ull);
  by_labels.gauge("g", "h", {{"device", "mlx5_0"}, {"desc", "a \"q\" \\ \n"}, {"counter", "SwLinkUp,32"}}, 0.5);
  by_labels.gauge_u64("n", "h", {{"method", "open"}}, 3);
  std::string a, b;
  write_text(by_set.families(), a);
  write_text(by_labels.families(), b);
  CHECK(a == b);
  CHECK(by_set.families()[1].samples[0].all_labels() == by_labels.families()[1].samples[0].labels);
  // A histogram against a set: the set's labels before le.
  MetricSink h;
  HistogramValue hv{{1.0}, {2}, 3, 4.5};
  h.add(LabelSet(Labels{{"p", "1"}}), "lat", MetricType::kHistogram, "h", hv);
  std::string ht;
  write_text(h.families(), ht);
  CHECK(ht.find("lat_bucket{p=\"1\",le=\"1\"} 2\n") != std::string::npos);
  CHECK(ht.find("lat_count{p=\"1\"} 3\n") != std::string::npos);
}

TEST_CASE("families keep declaration order and group their samples") {
  MetricSink s;
  s.gauge("a", "h", {{"p", "1"}}, 1);
  s.gauge("b", "h", {{"p", "1"}}, 2);
  s.gauge("a", "h", {{"p", "2"}}, 3);
  std::string out;
  write_text(s.families(), out);
  CHECK(out == "# HELP a h\n# TYPE a gauge\na{p=\"1\"} 1\na{p=\"2\"} 3\n# HELP b h\n# TYPE b gauge\nb{p=\"1\"} 2\n");
  CHECK_THROWS_AS(s.counter("a", "h", {}, 1), std::logic_error);
}

TEST_CASE("a family is found by its name, not by the address the name was passed at") {
  MetricSink s;
  std::string name = "a";  // one buffer, reused for another name
  s.gauge(name, "h", {}, 1);
  name = "b";
  s.gauge(name, "h", {}, 2);
  name = "a";
  s.gauge(name, "h", {}, 3);
  std::string out;
  write_text(s.families(), out);
  CHECK(out == "# HELP a h\n# TYPE a gauge\na 1\na 3\n# HELP b h\n# TYPE b gauge\nb 2\n");
  name = "b";
  CHECK_THROWS_AS(s.counter(name, "h", {}, 1), std::logic_error);
}

TEST_CASE("histograms are written with cumulative buckets, sum and count") {
  MetricSink s;
  HistogramValue h{{0.001, 0.01}, {2, 5}, 7, 0.125};
  s.add("rtt_seconds", MetricType::kHistogram, "h", {{"peer", "a"}}, h);
  std::string out;
  write_text(s.families(), out);
  CHECK(out ==
        "# HELP rtt_seconds h\n# TYPE rtt_seconds histogram\n"
        "rtt_seconds_bucket{peer=\"a\",le=\"0.001\"} 2\n"
        "rtt_seconds_bucket{peer=\"a\",le=\"0.01\"} 5\n"
        "rtt_seconds_bucket{peer=\"a\",le=\"+Inf\"} 7\n"
        "rtt_seconds_sum{peer=\"a\"} 0.125\n"
        "rtt_seconds_count{peer=\"a\"} 7\n");
}

TEST_CASE("gzip output decompresses to the input") {
  std::string text(10000, 'x');
  std::string gz = gzip_compress(text);
  REQUIRE(gz.size() > 18);
  CHECK(static_cast<unsigned char>(gz[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(gz[1]) == 0x8b);
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
  std::string back(20000, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_in = static_cast<uInt>(gz.size());
  zs.next_out = reinterpret_cast<Bytef*>(back.data());
  zs.avail_out = static_cast<uInt>(back.size());
  CHECK(inflate(&zs, Z_FINISH) == Z_STREAM_END);
  back.resize(zs.total_out);
  inflateEnd(&zs);
  CHECK(back == text);
}

TEST_CASE("Accept-Encoding negotiation") {
  CHECK(accepts_gzip("gzip"));
  CHECK(accepts_gzip("deflate, gzip;q=0.5"));
  CHECK(accepts_gzip("*"));
  CHECK_FALSE(accepts_gzip("identity"));
  CHECK_FALSE(accepts_gzip("gzip;q=0"));
  CHECK_FALSE(accepts_gzip(""));
}

TEST_CASE("label values are written as valid UTF-8 whatever bytes they hold") {
  MetricSink s;
  s.info("x_info", "help", {{"node_name", std::string("hca\xff\xfe") + " caf\xc3\xa9"}});
  s.info("x_info", "help", {{"node_name", "\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80 \xe2\x82"}});  // overlong, surrogate, > U+10FFFF, cut
  std::string out;
  write_text(s.families(), out);
  CHECK(is_valid_utf8(out));
  CHECK(out.find("node_name=\"hca\xEF\xBF\xBD\xEF\xBF\xBD caf\xc3\xa9\"") != std::string::npos);
  std::string replaced;
  append_escaped_label_value(replaced, "\xc0\xaf");
  CHECK(replaced == "\xEF\xBF\xBD\xEF\xBF\xBD");
  const LabelSet set(Labels{{"device", "mlx5\xff"}});
  CHECK(set.text() == "device=\"mlx5\xEF\xBF\xBD\"");
}

TEST_CASE("label values are cut at a character boundary after the documented bound") {
  std::string v(kMaxLabelValueBytes - 1, 'a');
  v += "\xc3\xa9tail";  // the two-byte character straddles the bound: dropped whole
  std::string out;
  append_escaped_label_value(out, v);
  CHECK(out == std::string(kMaxLabelValueBytes - 1, 'a'));
  out.clear();
  append_escaped_label_value(out, std::string(kMaxLabelValueBytes, '"'));
  CHECK(out.size() == 2 * kMaxLabelValueBytes);  // the bound counts input bytes; escapes may double them
}

TEST_CASE("JSON strings are escaped and valid UTF-8") {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\t\x01\x1f\x7f\xff\xe2\x82\xac", 14));
  CHECK(out == "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\x7f\xEF\xBF\xBD\xe2\x82\xac\"");
  out.clear();
  append_json_string(out, std::string("\0", 1));
  CHECK(out == "\"\\u0000\"");
  CHECK(is_valid_utf8("\xf0\x9f\x98\x80"));
  CHECK_FALSE(is_valid_utf8("\xf0\x9f\x98"));
  CHECK_FALSE(is_valid_utf8("\xed\xbf\xbf"));  // a surrogate
}
