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

#include "sources/sysfs/infiniband_class.h"
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

TEST_CASE("KeptDir reads the entries of names() by index through the same kept descriptors, reopened as by name") {
  TempTree t("kept");
  t.write("c/a", "1\n");
  t.write("c/b", "5\n");
  const std::string dir = t.root() + "/c";
  age(dir);
  KeptDir k(dir, 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  const std::uint64_t opened = k.generation();
  CHECK(opened > 0);
  REQUIRE(k.names());
  REQUIRE(*k.names().value == std::vector<std::string>{"a", "b"});
  CHECK(k.read_u64_at(0).value == 1);
  CHECK(k.read_u64("b").value == 5);  // opened by name: index 1 finds the same descriptor
  CHECK(k.read_u64_at(1).value == 5);
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{2, 1});
  CHECK(k.descriptors() == 3);
  CHECK(k.read_u64_at(2).error == ReadError::kNotFound);
  t.write("c/a", "3\n");  // in place
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.generation() == opened);  // still the same directory
  CHECK(k.read_u64_at(0).value == 3);
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{0, 1});
  // Replaced by rename: the directory is reopened (a new generation) and index 0 is the new file.
  t.write("a.new", "4\n");
  REQUIRE(std::rename((t.root() + "/a.new").c_str(), (dir + "/a").c_str()) == 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  CHECK(k.generation() > opened);
  REQUIRE(k.names());
  CHECK(k.read_u64_at(0).value == 4);
}

TEST_CASE("Device attributes fixed for the device's lifetime are read once per opening of its directory") {
  TempTree t("kept");
  for (const char* f : {"node_type", "node_guid", "sys_image_guid", "fw_ver", "hca_type", "hw_rev", "board_id",
                        "node_desc"})
    t.write(std::string("d/") + f, "x\n");
  t.write("d/node_type", "1: CA\n");
  t.write("d/node_guid", "0c42:a103:0040:29a0\n");
  t.write("d/sys_image_guid", "0c42:a103:0040:29a0\n");
  t.write("d/board_id", "MT_1\n");
  t.write("d/fw_ver", "28.1\n");
  t.write("d/node_desc", "host a\n");
  std::remove((t.root() + "/d/hca_type").c_str());  // optional: absent is kept like a value
  const std::string dir = t.root() + "/d";
  age(dir);
  KeptDir k(dir, 0);
  REQUIRE(k.refresh() == ReadError::kNone);
  DeviceAttributes a;
  read_device_attributes(k, a);
  CHECK(a.board_id.value == "MT_1");
  CHECK(a.hca_type.error == ReadError::kNotFound);
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{7, 0});
  // Rewritten in place, as only fw_ver and node_desc can be on a live device: those two are read again.
  t.write("d/board_id", "MT_2\n");
  t.write("d/fw_ver", "28.2\n");
  t.write("d/node_desc", "host b\n");
  REQUIRE(k.refresh() == ReadError::kNone);
  read_device_attributes(k, a);
  CHECK(a.board_id.value == "MT_1");
  CHECK(a.fw_ver.value == "28.2");
  CHECK(a.node_desc.value == "host b");
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{0, 2});
  // The directory replaced (a device registered again): everything is read again.
  std::filesystem::rename(dir, t.root() + "/old");
  std::filesystem::create_directory(dir);
  for (const auto& e : std::filesystem::directory_iterator(t.root() + "/old"))
    std::filesystem::copy(e.path(), dir + "/" + e.path().filename().string());
  t.write("d/hca_type", "MT4129\n");
  REQUIRE(k.refresh() == ReadError::kNone);
  read_device_attributes(k, a);
  CHECK(a.board_id.value == "MT_2");
  CHECK(a.hca_type.value == "MT4129");
  CHECK(k.take_counts() == std::pair<std::uint64_t, std::uint64_t>{8, 0});
}

TEST_CASE("KeptDir absent under a parent is looked up again once the parent has changed") {
  TempTree t("kept");
  t.write("p/a", "1\n");
  const std::string parent_path = t.root() + "/p";
  age(parent_path);
  KeptDir parent(parent_path, 0);
  KeptDir child(parent_path + "/c", 0);
  REQUIRE(parent.refresh() == ReadError::kNone);
  CHECK(child.refresh(&parent) == ReadError::kNotFound);
  REQUIRE(parent.refresh() == ReadError::kNone);
  CHECK(child.refresh(&parent) == ReadError::kNotFound);  // the parent unchanged: not looked up
  t.write("p/c/x", "9\n");  // p changes: reopened at its refresh, and the child looked up
  age(parent_path);
  REQUIRE(parent.refresh() == ReadError::kNone);
  REQUIRE(child.refresh(&parent) == ReadError::kNone);
  CHECK(child.read_u64("x").value == 9);
}

// A directory opened under a parent that has not been reopened since is checked through its own
// descriptor: its own changes show there, its replacement in the parent through the parent.
TEST_CASE("KeptDir under an unchanged parent sees its own changes and its replacement through the parent") {
  TempTree t("kept");
  t.write("p/c/a", "1\n");
  const std::string parent_path = t.root() + "/p", dir = parent_path + "/c";
  age(parent_path);
  age(dir);
  KeptDir parent(parent_path, 0);
  KeptDir child(dir, 0);
  REQUIRE(parent.refresh() == ReadError::kNone);
  REQUIRE(child.refresh(&parent) == ReadError::kNone);
  CHECK(child.read_u64("a").value == 1);
  const std::uint64_t opened = child.generation();
  REQUIRE(parent.refresh() == ReadError::kNone);
  REQUIRE(child.refresh(&parent) == ReadError::kNone);
  CHECK(child.generation() == opened);  // nothing changed: kept

  t.write("p/c/b", "2\n");  // the child changes, its parent does not
  REQUIRE(parent.refresh() == ReadError::kNone);
  REQUIRE(child.refresh(&parent) == ReadError::kNone);
  CHECK(child.generation() > opened);
  CHECK(child.read_u64("b").value == 2);

  t.write("p/c.new/a", "7\n");  // replaced by rename: the parent changes
  std::filesystem::remove_all(dir);
  std::filesystem::rename(parent_path + "/c.new", dir);
  age(dir);
  REQUIRE(parent.refresh() == ReadError::kNone);
  REQUIRE(child.refresh(&parent) == ReadError::kNone);
  CHECK(child.read_u64("a").value == 7);
  std::filesystem::remove_all(dir);
  REQUIRE(parent.refresh() == ReadError::kNone);
  CHECK(child.refresh(&parent) == ReadError::kNotFound);
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

TEST_CASE("KeptDirs finds a directory through a caller's Ref while no sweep has closed it") {
  TempTree t("kept");
  t.write("d1/a", "1\n");
  const std::string path = t.root() + "/d1";
  KeptDirs dirs;
  KeptDirs::Ref ref;
  KeptDir* first = &dirs.at(ref, path);
  CHECK(first->read_u64("a").value == 1);
  CHECK(&dirs.at(path) == first);  // the same entry by path
  dirs.sweep();
  CHECK(&dirs.at(ref, path) == first);  // asked for in the last cycle: kept
  CHECK(dirs.at(ref, path).read_u64("a").value == 1);
  dirs.sweep();
  dirs.sweep();  // a cycle without it: closed, and the Ref no longer trusted
  CHECK(dirs.descriptors() == 0);
  CHECK(dirs.at(ref, path).read_u64("a").value == 1);
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
