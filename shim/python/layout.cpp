#include "python/layout.h"

#include <cstring>

namespace cuxfer::shim::python {

namespace {

constexpr GeneratedRow kGenerated[] = {
#include "python/layouts.inc"
};

}  // namespace

const PyLayout* generated_layout(uint32_t version) {
  for (const GeneratedRow& r : kGenerated)
    if (r.layout.version == version) return &r.layout;
  return nullptr;
}

const DebugIndex* generated_debug_index(uint32_t version) {
  for (const GeneratedRow& r : kGenerated)
    if (r.layout.version == version) return r.debug.size ? &r.debug : nullptr;
  return nullptr;
}

bool layout_from_debug_offsets(const void* runtime, uint32_t version, PyLayout& out, std::string& why) {
  if (!runtime) {
    why = "_PyRuntime not found";
    return false;
  }
  const PyLayout* row = generated_layout(version);
  const DebugIndex* index = generated_debug_index(version);
  if (!row || !index) {
    why = "no layout of this version's _Py_DebugOffsets (3.13 to 3.15 are known)";
    return false;
  }
  const DebugIndex& d = *index;
  const auto* bytes = static_cast<const unsigned char*>(runtime);
  if (std::memcmp(bytes, "xdebugpy", 8) != 0) {
    why = "_PyRuntime does not start with the debug-offsets cookie";
    return false;
  }
  // The struct is u64 fields after the cookie; each read where the row says.
  auto field = [&](uint32_t at) {
    uint64_t v;
    std::memcpy(&v, bytes + at, sizeof v);
    return v;
  };
  const uint64_t stated = field(d.version);
  if (((stated >> 24) & 0xff) != 3 || ((stated >> 16) & 0xff) != (version & 0xff)) {
    why = "the debug offsets are of another version";
    return false;
  }
  if (field(d.free_threaded)) {
    why = "a free-threaded build";
    return false;
  }
  const uint32_t used[] = {d.ts_interp,      d.ts_current_frame, d.frame_previous,  d.frame_executable,
                           d.frame_instr_ptr, d.frame_owner,     d.code_filename,   d.code_name,
                           d.code_qualname,  d.code_line_table,  d.code_first_line, d.code_adaptive,
                           d.object_type,    d.bytes_size,       d.bytes_data,      d.str_state,
                           d.str_length,     d.str_ascii_size};
  // Every offset must be small: a struct member, not garbage.
  for (uint32_t at : used)
    if (field(at) >= 4096) {
      why = "an implausible debug offset";
      return false;
    }
  auto u = [&](uint32_t at) { return static_cast<uint32_t>(field(at)); };
  // The _PyRuntime fields behind the four C API calls
  // (python/runtime_state.h), the stack reference's tag bits and the
  // owners' numbering are not among the debug offsets: the row states them.
  // A patch release whose _PyRuntime is laid out otherwise is caught by the
  // first read, which must agree with the C API before any is trusted.
  out = *row;
  out.model = FrameModel::Interp313;
  out.ts_cframe = out.cframe_current_frame = out.frame_is_entry = kNoField;
  out.ts_frame = u(d.ts_current_frame);
  out.ts_interp = u(d.ts_interp);
  out.frame_previous = u(d.frame_previous);
  out.frame_code = u(d.frame_executable);
  out.frame_instr = u(d.frame_instr_ptr);
  out.frame_owner = u(d.frame_owner);
  out.code_filename = u(d.code_filename);
  out.code_name = u(d.code_name);
  out.code_qualname = u(d.code_qualname);
  out.code_first_line = u(d.code_first_line);
  out.code_line_table = u(d.code_line_table);
  out.code_bytecode = u(d.code_adaptive);
  out.object_type = u(d.object_type);
  out.str_length = u(d.str_length);
  out.str_state = u(d.str_state);
  // A compact non-ASCII string adds what the headers say (utf8_length and
  // utf8) to the ASCII header, whose size the debug offsets state.
  out.str_ascii_size = u(d.str_ascii_size);
  out.str_compact_size = out.str_ascii_size + (row->str_compact_size - row->str_ascii_size);
  out.bytes_size = u(d.bytes_size);
  out.bytes_data = u(d.bytes_data);
  return true;
}

}  // namespace cuxfer::shim::python
