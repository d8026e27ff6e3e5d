// The PCI tree as sysfs shows it: /sys/devices/pci<DDDD:BB>/<root port>/<bridge>/.../<function>,
// every PCI function a directory named by its address, every bridge the directory above its
// children. A function's chain is read from its canonical path (class/infiniband/<dev>/device
// and bus/pci/devices/<bdf> are symlinks into it), so no bridge is guessed from bus numbers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sources/common/result.h"
#include "sources/pci/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::pci {

// Where a function sits: its host bridge ("pci0000:17") and the functions from the root port
// down to itself ({"0000:17:01.0", "0000:18:00.0", "0000:19:01.0", "0000:1b:00.0"}).
struct Location {
  std::string dir;          // canonical directory of the function
  std::string host_bridge;  // "pciDDDD:BB"
  std::vector<std::string> chain;
  const std::string& bdf() const { return chain.back(); }
  // The directory of chain[i] (a prefix of dir).
  std::string dir_of(std::size_t i) const;
};
// From a canonical path: the trailing run of function names and the host bridge above it. A
// path below a function (a virtio device: .../0000:00:03.0/virtio0) is located at that function.
// nullopt when no host bridge is above (a virtual device: devices/virtual/...).
std::optional<Location> locate(std::string_view canonical_path);
// realpath(3) of a path, as a value.
Result<std::string> canonical(const std::string& path);

// What a function is: read when the topology is (re)built, not per scrape.
struct Identity {
  std::uint32_t class_code = 0;  // "0x030200" -> 0x030200 (base class, subclass, prog-if)
  std::uint16_t vendor = 0;
  std::uint16_t device = 0;
  int numa_node = -1;
};
// The identity's files; problems other than a file that is not there go to issues.
Identity read_identity(const std::string& dir, std::vector<std::pair<std::string, ReadError>>& issues);
// The ACS capability of a function from its `config` file (read-only; never written).
Acs read_acs(const std::string& dir, std::vector<std::pair<std::string, ReadError>>& issues);

// Accelerators by PCI class and vendor (data, not branches). A BMC's VGA (ASPEED, class 0x0300)
// is not an accelerator: class 0x0300 counts only for the vendors listed.
struct GpuClass {
  std::uint16_t class_subclass;  // class_code >> 8
  std::uint16_t vendor;          // 0: any vendor
  const char* what;
};
std::span<const GpuClass> gpu_classes();
bool is_gpu(const Identity& id);

// Every accelerator function under bus/pci/devices, sorted by address (nvidia-smi numbers GPUs in
// PCI bus order: index i here is its GPU i).
struct Gpu {
  Location location;
  Identity identity;
};
struct GpuScan {
  std::vector<Gpu> gpus;
  std::size_t functions = 0;  // PCI functions listed
  bool bus_present = false;   // bus/pci/devices exists (a host or tree without PCI: state)
  std::vector<std::pair<std::string, ReadError>> issues;
};
GpuScan scan_gpus(const std::string& sysfs_root);

// A function's link and AER files, read at every scrape through a kept directory (pread).
struct Link {
  std::optional<std::uint32_t> current_speed;  // tenths of GT/s
  std::optional<std::uint32_t> max_speed;
  std::optional<std::uint32_t> current_width;  // lanes
  std::optional<std::uint32_t> max_width;
  bool present() const { return current_speed || max_speed || current_width || max_width; }
};
enum class AerSeverity : std::uint8_t { kCorrectable, kNonfatal, kFatal };
inline constexpr std::array<std::pair<AerSeverity, const char*>, 3> kAerFiles{{
    {AerSeverity::kCorrectable, "aer_dev_correctable"},
    {AerSeverity::kNonfatal, "aer_dev_nonfatal"},
    {AerSeverity::kFatal, "aer_dev_fatal"},
}};
struct Health {
  Link link;
  std::array<std::optional<AerCounters>, 3> aer;  // by AerSeverity; unset: no AER file
};
// Absent files are state (a conventional PCI function has no link files, a kernel without
// CONFIG_PCIEAER no aer_dev_*): looked up in the directory's listing, which the kept directory
// takes once per opening, so an absent file costs no system call. Malformed or unreadable ones go
// to issues as (file, error). aer_types: the per-type counters too; else the totals only.
// maxima: max_link_speed/width too (the Link Capabilities register: fixed for the function's life,
// so a caller reads them once per topology and keeps them).
Health read_health(sysfs::KeptDir& dir, bool aer_types, bool maxima, std::vector<std::pair<std::string, ReadError>>& issues);

}  // namespace rdma::pci
