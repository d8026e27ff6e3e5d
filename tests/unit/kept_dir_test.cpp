// KeptDir: files kept open across scrapes and re-read with pread at offset 0, reopened when the
// directory is not the one they were opened in.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "sources/sysfs/reader.h"
#include "tests/lib/temp_tree.h"

using namespace rdma::sysfs;
using rdma::ReadError;
using rdma::testing::TempTree;

namespace {
// (ctime moves too; it is compared as well)
void age(const std::string& dir) { REQUIRE(rdma::testing::age_dir(dir)); }
}  // namespace

TEST_CASE("KeptDir re-reads a kept file with pread and sees content rewritten in place") {
  TempTree t("kept");
  t.write("c/a", "1\n");
  const std::string dir = t.root() + "/c";
  age(dir);
  KeptDir k(dir, 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("a").value == 1);
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{1, 0});  // opened once
  // Rewritten in place (same inode): the kept descriptor reads the new content.
  t.write("c/a", "22\n");
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("a").value == 22);
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{0, 1});  // pread only
  CHECK(k.descriptors() == 2);  // the directory and a
}

TEST_CASE("KeptDir reopens a file replaced by rename, and sees one removed") {
  TempTree t("kept");
  t.write("c/a", "1\n");
  t.write("c/b", "5\n");
  const std::string dir = t.root() + "/c";
  age(dir);
  KeptDir k(dir, 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("a").value == 1);
  CHECK(k.read_u64("b").value == 5);
  t.write("a.new", "2\n");
  REQUIRE(std::rename((t.root() + "/a.new").c_str(), (dir + "/a").c_str()) == 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("a").value == 2);  // the old inode still reads 1
  age(dir);
  REQUIRE(k.refresh() == ReadError::kNone);
  k.take_counts();
  REQUIRE(std::remove((dir + "/b").c_str()) == 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("b").error == ReadError::kNotFound);
  REQUIRE(k.names());
  CHECK(*k.names().value == std::vector<std::string>{"a"});
}

TEST_CASE("KeptDir follows its path: a directory renamed into place is the new one, a removed one is gone") {
  TempTree t("kept");
  t.write("c/a", "1\n");
  t.write("c.new/a", "7\n");
  const std::string dir = t.root() + "/c";
  age(dir);
  KeptDir k(dir, 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("a").value == 1);
  std::filesystem::remove_all(dir);
  std::filesystem::rename(t.root() + "/c.new", dir);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.read_u64("a").value == 7);
  std::filesystem::remove_all(dir);
  CHECK(k.refresh() == ReadError::kNotFound);
  CHECK(k.read_u64("a").error == ReadError::kNotFound);
  CHECK(k.descriptors() == 0);
}

TEST_CASE("KeptDir does not trust a directory changed within the racy window: it reopens it at each refresh") {
  TempTree t("kept");
  t.write("c/a", "1\n");  // just written: its directory's times are now
  KeptDir k(t.root() + "/c");
  for (int i = 0; i < 3; ++i) {
    REQUIRE(k.refresh() == ReadError::kNone);
    CHECK(k.read_u64("a").value == 1);
    CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{1, 0});
  }
}

TEST_CASE("KeptDirs closes the directories a scrape did not ask for") {
  TempTree t("kept");
  t.write("d1/a", "1\n");
  t.write("d2/a", "2\n");
  KeptDirs dirs;
  CHECK(dirs.at(t.root() + "/d1").read_u64("a").value == 1);
  CHECK(dirs.at(t.root() + "/d2").read_u64("a").value == 2);
  dirs.sweep();
  CHECK(dirs.descriptors() == 4);
  CHECK(dirs.at(t.root() + "/d1").read_u64("a").value == 1);
  dirs.sweep();  // d2 was not asked for
  CHECK(dirs.descriptors() == 2);
}

// The premise on a real kernel: a sysfs attribute kept open and read again at offset 0 runs its
// show() again. lo's transmit counter moves with each datagram sent to 127.0.0.1.
TEST_CASE("A kept sysfs attribute read with pread at offset 0 is current (real kernel sysfs)") {
  const std::string dir = "/sys/class/net/lo/statistics";
  KeptDir k(dir);
  REQUIRE(k.refresh() == ReadError::kNone);
  auto before = k.read_u64("tx_packets");
  REQUIRE(before);
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(s >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);  // discard; nobody needs to listen
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 3; ++i)
    REQUIRE(::sendto(s, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) == 1);
  ::close(s);
  k.take_counts();
  auto after = k.read_u64("tx_packets");
  REQUIRE(after);
  CHECK(after.value >= before.value + 3);
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{0, 1});  // through the kept descriptor
}
