// A machine profile: what `cuxfer calibrate` measured on one host and GPU
// (docs/calibrate.md has the file format, schema "cuxfer.machine/1"), and the
// cost model built on it. The analyzer uses it for its estimates, the launcher
// for the pinned rewrite's staging thresholds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cuxfer::model {

struct CopyPoint {
  uint64_t bytes = 0;
  double gbps = 0;  // 1e9 bytes per second, median of the reps
};

struct RegistrationPoint {
  uint64_t bytes = 0;
  double register_us = 0;
  double unregister_us = 0;
};

struct MemcpyPoint {
  uint32_t threads = 0;
  double gbps = 0;
};

struct MachineProfile {
  static constexpr const char* kSchema = "cuxfer.machine/1";
  std::string path;  // where it was read from (not stored)
  std::string created;  // ISO 8601 UTC
  std::string hostname, cpu;
  uint32_t cores = 0;
  int gpu_index = 0;
  std::string gpu_name, gpu_uuid, pci_bus_id;
  int driver_version = 0;
  bool simulated = false;
  // Curves per direction (0 = H2D, 1 = D2H), sorted by bytes.
  std::vector<CopyPoint> pinned[2], pageable[2];
  std::vector<RegistrationPoint> registration;
  std::vector<MemcpyPoint> host_memcpy;  // sorted by threads

  // Interpolated (log-log) bandwidth; clamped to the measured range.
  double pinned_gbps(int dir, uint64_t bytes) const;
  double pageable_gbps(int dir, uint64_t bytes) const;
  // Register + unregister of `bytes`, nanoseconds (interpolated linearly in bytes).
  double registration_ns(uint64_t bytes) const;
  // Host memcpy bandwidth with `threads` threads (the nearest measured count below).
  double memcpy_gbps(uint32_t threads) const;
  // The staging path's modelled time for one copy (rewrite/staging.cpp's
  // chunking: chunks of a quarter, 1..8 MiB; the CPU copy of one chunk
  // overlaps the DMA of another; the first (H2D) or last (D2H) chunk's CPU
  // copy is not hidden; each chunk pays one small pinned copy's latency and,
  // with several memcpy threads, ~10 us to wake them).
  double staged_ns(int dir, uint64_t bytes, uint32_t threads) const;
  // Smallest measured size (>= 64 KiB) from which staging is modelled at
  // least 20 % faster than the driver's pageable path at that size and every
  // larger one; nullopt when it never is.
  std::optional<uint64_t> stage_min(int dir, uint32_t threads) const;
};

// Reads and validates a profile. False with a one-line `error` on any problem.
bool read_machine_profile(const std::string& path, MachineProfile& out, std::string& error);
bool parse_machine_profile(const std::string& text, MachineProfile& out, std::string& error);
std::string machine_profile_json(const MachineProfile& p);

// Where profiles live: $CUXFER_PROFILE_DIR, else $XDG_CACHE_HOME/cuxfer/machines,
// else ~/.cache/cuxfer/machines ($HOME, else the user's home in the password
// database); empty when there is no home (then there is no profile: never a
// shared directory). One file per host and GPU: <host>-<gpu uuid>.json.
std::string machine_profile_dir();
std::string machine_profile_file_name(const std::string& hostname, const std::string& gpu_uuid);
// The newest readable profile of `hostname` in machine_profile_dir(), if any
// (GPU index 0's when several GPUs were calibrated).
std::optional<MachineProfile> find_machine_profile(const std::string& hostname);

}  // namespace cuxfer::model
