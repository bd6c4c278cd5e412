#include "python/layout.h"

#include <cstring>

namespace cuxfer::shim::python {

namespace {

constexpr PyLayout kGenerated[] = {
#include "python/layouts.inc"
};

// 3.13's _Py_DebugOffsets is a cookie and u64 fields only: the index of each
// field this walk reads, in that version's declaration order (sections:
// runtime 3, interpreter 13, thread 9, frame 6, code 10, object 2, type 4,
// tuple 3, list 3, dict 3, float 2, long 3, bytes 3, unicode 4).
namespace v313 {
constexpr int kVersion = 1, kFreeThreaded = 2;
constexpr int kTsInterp = 22, kTsCurrentFrame = 23;
constexpr int kFramePrevious = 29, kFrameExecutable = 30, kFrameInstrPtr = 31, kFrameOwner = 33;
constexpr int kCodeFilename = 35, kCodeName = 36, kCodeQualname = 37, kCodeLineTable = 38, kCodeFirstLine = 39,
              kCodeAdaptive = 43;
constexpr int kObType = 45;
constexpr int kBytesSize = 65, kBytesData = 66;
constexpr int kStrState = 68, kStrLength = 69, kStrAsciiSize = 70;
constexpr int kFields = 71;
// What a compact non-ASCII string adds to PyASCIIObject (utf8_length, utf8).
constexpr uint32_t kCompactExtra = 16;
}  // namespace v313

}  // namespace

const PyLayout* generated_layout(uint32_t version) {
  for (const PyLayout& l : kGenerated)
    if (l.version == version) return &l;
  return nullptr;
}

bool layout_from_debug_offsets(const void* runtime, uint32_t version, PyLayout& out, std::string& why) {
  if (!runtime) {
    why = "_PyRuntime not found";
    return false;
  }
  if (version != 0x030d) {
    why = "no reader for this version's _Py_DebugOffsets";
    return false;
  }
  const auto* bytes = static_cast<const unsigned char*>(runtime);
  if (std::memcmp(bytes, "xdebugpy", 8) != 0) {
    why = "_PyRuntime does not start with the debug-offsets cookie";
    return false;
  }
  uint64_t f[v313::kFields];
  std::memcpy(f, bytes, sizeof f);
  if (((f[v313::kVersion] >> 24) & 0xff) != 3 || ((f[v313::kVersion] >> 16) & 0xff) != (version & 0xff)) {
    why = "the debug offsets are of another version";
    return false;
  }
  if (f[v313::kFreeThreaded]) {
    why = "a free-threaded build";
    return false;
  }
  // Every offset must be small: a struct member, not garbage.
  const int used[] = {v313::kTsInterp, v313::kTsCurrentFrame, v313::kFramePrevious, v313::kFrameExecutable,
                      v313::kFrameInstrPtr, v313::kFrameOwner, v313::kCodeFilename, v313::kCodeName,
                      v313::kCodeQualname, v313::kCodeLineTable, v313::kCodeFirstLine, v313::kCodeAdaptive,
                      v313::kObType, v313::kBytesSize, v313::kBytesData, v313::kStrState, v313::kStrLength,
                      v313::kStrAsciiSize};
  for (int i : used)
    if (f[i] >= 4096) {
      why = "an implausible debug offset";
      return false;
    }
  auto u = [&](int i) { return static_cast<uint32_t>(f[i]); };
  out = PyLayout{};
  out.version = version;
  out.model = FrameModel::Interp313;
  out.ts_cframe = out.cframe_current_frame = out.frame_is_entry = kNoField;
  out.ts_frame = u(v313::kTsCurrentFrame);
  out.ts_interp = u(v313::kTsInterp);
  out.frame_previous = u(v313::kFramePrevious);
  out.frame_code = u(v313::kFrameExecutable);
  out.frame_instr = u(v313::kFrameInstrPtr);
  out.frame_owner = u(v313::kFrameOwner);
  out.code_filename = u(v313::kCodeFilename);
  out.code_name = u(v313::kCodeName);
  out.code_qualname = u(v313::kCodeQualname);
  out.code_first_line = u(v313::kCodeFirstLine);
  out.code_line_table = u(v313::kCodeLineTable);
  out.code_bytecode = u(v313::kCodeAdaptive);
  out.object_type = u(v313::kObType);
  out.str_length = u(v313::kStrLength);
  out.str_state = u(v313::kStrState);
  out.str_ascii_size = u(v313::kStrAsciiSize);
  out.str_compact_size = out.str_ascii_size + v313::kCompactExtra;
  out.bytes_size = u(v313::kBytesSize);
  out.bytes_data = u(v313::kBytesData);
  // _PyRuntime's fields behind the four C API calls (python/runtime_state.h)
  // are not among the debug offsets: the row generated from 3.13's own
  // headers states them. A 3.13.x whose _PyRuntime is laid out otherwise is
  // caught by the first read, which must agree with the C API before any is
  // trusted; without the row, the C API it is.
  const PyLayout* row = generated_layout(version);
  out.rt_initialized = row ? row->rt_initialized : kNoField;
  out.rt_finalizing = row ? row->rt_finalizing : kNoField;
  out.rt_main = row ? row->rt_main : kNoField;
  out.rt_auto_interp = row ? row->rt_auto_interp : kNoField;
  out.rt_tss_created = row ? row->rt_tss_created : kNoField;
  out.rt_tss_key = row ? row->rt_tss_key : kNoField;
  return true;
}

}  // namespace cuxfer::shim::python
