#include "unwind/eh_frame.h"

#include <link.h>

#include <cstring>

namespace cuxfer::shim::unwind {
namespace {

// DWARF register numbers on x86-64 (System V psABI, figure 3.36).
constexpr uint64_t kRbp = 6, kRsp = 7, kReturnAddress = 16;

// Pointer encodings (LSB, "DWARF Extensions": DW_EH_PE_*).
constexpr uint8_t kPeOmit = 0xff, kPeAbsptr = 0x00, kPeUleb128 = 0x01, kPeUdata2 = 0x02, kPeUdata4 = 0x03,
                  kPeUdata8 = 0x04, kPeSleb128 = 0x09, kPeSdata2 = 0x0a, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c,
                  kPePcrel = 0x10, kPeDatarel = 0x30, kPeIndirect = 0x80;

// A bounded reader: every read past `end` sets `bad` and yields 0, so a
// corrupt table ends in Unsupported instead of a stray read.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool bad = false;

  bool has(size_t n) {
    if (bad || static_cast<size_t>(end - p) < n) bad = true;
    return !bad;
  }
  template <typename T>
  T fixed() {
    T v{};
    if (!has(sizeof(T))) return v;
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (!has(1) || shift > 63) {
        bad = true;
        return 0;
      }
      uint8_t b = *p++;
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      if (!has(1) || shift > 63) {
        bad = true;
        return 0;
      }
      b = *p++;
      v |= static_cast<int64_t>(uint64_t{b & 0x7fu} << shift);
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= -(int64_t{1} << shift);
    return v;
  }
  void skip(uint64_t n) {
    if (has(n)) p += n;
  }
  // An encoded pointer (pcrel relative to where it is stored). Indirect and
  // datarel pointers are not needed for an FDE's range: refused.
  uint64_t pointer(uint8_t enc) {
    if (enc == kPeOmit) return 0;
    const auto at = reinterpret_cast<uint64_t>(p);
    uint64_t v = 0;
    switch (enc & 0x0f) {
      case kPeAbsptr: v = fixed<uint64_t>(); break;
      case kPeUleb128: v = uleb(); break;
      case kPeUdata2: v = fixed<uint16_t>(); break;
      case kPeUdata4: v = fixed<uint32_t>(); break;
      case kPeUdata8: v = fixed<uint64_t>(); break;
      case kPeSleb128: v = static_cast<uint64_t>(sleb()); break;
      case kPeSdata2: v = static_cast<uint64_t>(int64_t{fixed<int16_t>()}); break;
      case kPeSdata4: v = static_cast<uint64_t>(int64_t{fixed<int32_t>()}); break;
      case kPeSdata8: v = fixed<uint64_t>(); break;
      default: bad = true; return 0;
    }
    switch (enc & 0x70) {
      case 0: break;
      case kPePcrel: v += at; break;
      default: bad = true; return 0;
    }
    if (enc & kPeIndirect) bad = true;
    return v;
  }
};

// Where a register's caller value is, as far as the fast walk cares:
// unchanged, saved at CFA + offset, saved at rbp + offset (the DW_OP_breg6
// expression of a realigning prologue), or anywhere else.
enum class RegRule : uint8_t { Same, Offset, AtRbp, Other };

// A DWARF expression that is exactly `DW_OP_breg6 k` (then `DW_OP_deref`
// when `deref`): what GCC and Clang write for a function that realigns its
// stack through a DRAP register (force_align_arg_pointer, AVX-512 locals):
// the CFA is the value saved at rbp + k, and rbp's caller value is saved at
// rbp + 0. Anything else is not followed.
bool rbp_expression(Reader r, bool deref, int64_t* k) {
  constexpr uint8_t kOpBreg6 = 0x76, kOpDeref = 0x06;
  if (r.fixed<uint8_t>() != kOpBreg6) return false;
  *k = r.sleb();
  if (deref && r.fixed<uint8_t>() != kOpDeref) return false;
  return !r.bad && r.p == r.end;
}

struct RowState {
  uint64_t cfa_reg = kRsp;
  int64_t cfa_offset = 8;
  bool cfa_expression = false;  // an expression the walk does not follow
  bool cfa_rbp_deref = false;   // CFA = *(rbp + cfa_offset)
  RegRule rbp = RegRule::Same;
  int64_t rbp_offset = 0;
  RegRule ra = RegRule::Other;  // must become Offset(-8)
  int64_t ra_offset = 0;
  bool ra_undefined = false;
};

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_reg = kReturnAddress;
  uint8_t fde_encoding = kPeAbsptr;
  bool augmented = false;  // 'z': FDEs carry an augmentation length
  const uint8_t* instructions = nullptr;
  const uint8_t* end = nullptr;
};

// The length field at `p` (32-bit, or 0xffffffff then 64-bit): the entry's
// body starts after it; false when it runs past `end` or is a terminator.
bool entry_bounds(Reader& r, const uint8_t** body_end) {
  uint64_t len = r.fixed<uint32_t>();
  if (len == 0xffffffffu) len = r.fixed<uint64_t>();
  if (r.bad || len == 0 || len > static_cast<uint64_t>(r.end - r.p)) return false;
  *body_end = r.p + len;
  return true;
}

// False when the CIE is not one the walk reads; *signal set for an 'S' CIE.
bool parse_cie(const uint8_t* at, const uint8_t* end, Cie& cie, bool* signal) {
  Reader r{at, end};
  const uint8_t* body_end = nullptr;
  if (!entry_bounds(r, &body_end)) return false;
  r.end = body_end;
  const uint64_t id = r.fixed<uint32_t>();
  const uint8_t version = r.fixed<uint8_t>();
  if (r.bad || id != 0 || (version != 1 && version != 3)) return false;
  const char* aug = reinterpret_cast<const char*>(r.p);
  const size_t aug_len = strnlen(aug, static_cast<size_t>(r.end - r.p));
  r.skip(aug_len + 1);
  if (r.bad || std::strstr(aug, "eh") != nullptr) return false;  // pre-1998 GCC layout
  cie.code_align = r.uleb();
  cie.data_align = r.sleb();
  cie.ra_reg = version == 1 ? r.fixed<uint8_t>() : r.uleb();
  if (r.bad || cie.ra_reg != kReturnAddress) return false;
  if (aug[0] == 'z') {
    cie.augmented = true;
    const uint64_t data_len = r.uleb();
    const uint8_t* data_end = r.p + data_len;
    if (r.bad || data_len > static_cast<uint64_t>(r.end - r.p)) return false;
    for (size_t i = 1; i < aug_len; ++i) {
      switch (aug[i]) {
        case 'R': cie.fde_encoding = r.fixed<uint8_t>(); break;
        case 'P': {
          const uint8_t enc = r.fixed<uint8_t>();
          // The personality pointer is not needed: skip it by its size.
          switch (enc & 0x0f) {
            case kPeAbsptr: case kPeUdata8: case kPeSdata8: r.skip(8); break;
            case kPeUdata4: case kPeSdata4: r.skip(4); break;
            case kPeUdata2: case kPeSdata2: r.skip(2); break;
            case kPeUleb128: r.uleb(); break;
            case kPeSleb128: r.sleb(); break;
            default: return false;
          }
          break;
        }
        case 'L': r.fixed<uint8_t>(); break;
        case 'S': *signal = true; return false;  // a signal frame: its registers are in a ucontext
        case 'B': case 'G': break;  // AArch64 pointer keys, MTE tagging: no data
        default: return false;      // unknown: its data's meaning is unknown
      }
    }
    if (r.bad || r.p > data_end) return false;
    r.p = data_end;
  } else if (aug[0] != '\0') {
    return false;
  }
  cie.instructions = r.p;
  cie.end = r.end;
  return !r.bad;
}

// Runs CFA instructions from `r` up to the row that covers `pc` (stops once
// the location passes it). `initial` is the CIE's row, for DW_CFA_restore.
// False for anything outside what the fast walk follows, *why saying what.
bool run_instructions(Reader& r, const Cie& cie, uint64_t loc, uint64_t pc, RowState& row,
                      const RowState& initial, Decline* why) {
  RowState stack[8];
  int depth = 0;
  auto set_reg = [&](uint64_t reg, RegRule rule, int64_t offset) {
    if (reg == kRbp) {
      row.rbp = rule;
      row.rbp_offset = offset;
    } else if (reg == kReturnAddress) {
      row.ra = rule;
      row.ra_offset = offset;
      row.ra_undefined = false;
    } else if (reg == kRsp && rule != RegRule::Same) {
      *why = Decline::CfaRegister;  // rsp restored from memory: not the CFA
      return false;
    }
    return true;
  };
  auto restore_reg = [&](uint64_t reg) {
    if (reg == kRbp) {
      row.rbp = initial.rbp;
      row.rbp_offset = initial.rbp_offset;
    } else if (reg == kReturnAddress) {
      row.ra = initial.ra;
      row.ra_offset = initial.ra_offset;
      row.ra_undefined = initial.ra_undefined;
    }
  };
  auto advance = [&](uint64_t delta) {
    loc += delta * cie.code_align;
    return loc <= pc;  // false: the rows from here on are past pc
  };
  while (r.p < r.end && !r.bad) {
    const uint8_t op = r.fixed<uint8_t>();
    const uint8_t low = op & 0x3f;
    switch (op & 0xc0) {
      case 0x40:  // DW_CFA_advance_loc
        if (!advance(low)) return true;
        continue;
      case 0x80:  // DW_CFA_offset
        if (!set_reg(low, RegRule::Offset, static_cast<int64_t>(r.uleb()) * cie.data_align)) return false;
        continue;
      case 0xc0:  // DW_CFA_restore
        restore_reg(low);
        continue;
      default: break;
    }
    switch (op) {
      case 0x00: break;  // nop
      case 0x01: {       // set_loc
        const uint64_t to = r.pointer(cie.fde_encoding);
        if (to > pc) return !r.bad;
        loc = to;
        break;
      }
      case 0x02: if (!advance(r.fixed<uint8_t>())) return !r.bad; break;
      case 0x03: if (!advance(r.fixed<uint16_t>())) return !r.bad; break;
      case 0x04: if (!advance(r.fixed<uint32_t>())) return !r.bad; break;
      case 0x05: {  // offset_extended
        const uint64_t reg = r.uleb();
        if (!set_reg(reg, RegRule::Offset, static_cast<int64_t>(r.uleb()) * cie.data_align)) return false;
        break;
      }
      case 0x06: restore_reg(r.uleb()); break;  // restore_extended
      case 0x07: {                              // undefined
        const uint64_t reg = r.uleb();
        if (reg == kReturnAddress) {
          row.ra = RegRule::Other;
          row.ra_undefined = true;
        } else if (reg == kRbp) {
          row.rbp = RegRule::Other;
        }
        break;
      }
      case 0x08: if (!set_reg(r.uleb(), RegRule::Same, 0)) return false; break;  // same_value
      case 0x09: {  // register: the caller's value is in another register
        const uint64_t reg = r.uleb();
        r.uleb();
        if (!set_reg(reg, RegRule::Other, 0)) return false;
        break;
      }
      case 0x0a:  // remember_state
        if (depth == 8) {
          *why = Decline::Opcode;
          return false;
        }
        stack[depth++] = row;
        break;
      case 0x0b:  // restore_state (the CFA rule is part of the state, as in libgcc)
        if (depth == 0) {
          *why = Decline::BadEntry;
          return false;
        }
        row = stack[--depth];
        break;
      case 0x0c:  // def_cfa
        row.cfa_reg = r.uleb();
        row.cfa_offset = static_cast<int64_t>(r.uleb());
        row.cfa_expression = row.cfa_rbp_deref = false;
        break;
      case 0x0d:  // def_cfa_register
        row.cfa_reg = r.uleb();
        row.cfa_expression = row.cfa_rbp_deref = false;
        break;
      case 0x0e:  // def_cfa_offset (only meaningful for a register CFA)
        row.cfa_offset = static_cast<int64_t>(r.uleb());
        if (row.cfa_rbp_deref) row.cfa_expression = true;
        break;
      case 0x0f: {  // def_cfa_expression
        const uint64_t len = r.uleb();
        const uint8_t* at = r.p;
        r.skip(len);
        if (r.bad) break;
        int64_t k = 0;
        row.cfa_rbp_deref = rbp_expression(Reader{at, at + len}, true, &k);
        row.cfa_expression = !row.cfa_rbp_deref;
        row.cfa_offset = k;
        break;
      }
      case 0x10:    // expression: the caller's value is saved at the address it computes
      case 0x16: {  // val_expression: it is the value computed
        const uint64_t reg = r.uleb();
        const uint64_t len = r.uleb();
        const uint8_t* at = r.p;
        r.skip(len);
        if (r.bad) break;
        int64_t k = 0;
        if (op == 0x10 && reg == kRbp && rbp_expression(Reader{at, at + len}, false, &k)) {
          if (!set_reg(reg, RegRule::AtRbp, k)) return false;
        } else if (!set_reg(reg, RegRule::Other, 0)) {
          return false;
        }
        break;
      }
      case 0x11: {  // offset_extended_sf
        const uint64_t reg = r.uleb();
        if (!set_reg(reg, RegRule::Offset, r.sleb() * cie.data_align)) return false;
        break;
      }
      case 0x12:  // def_cfa_sf
        row.cfa_reg = r.uleb();
        row.cfa_offset = r.sleb() * cie.data_align;
        row.cfa_expression = row.cfa_rbp_deref = false;
        break;
      case 0x13:  // def_cfa_offset_sf
        row.cfa_offset = r.sleb() * cie.data_align;
        if (row.cfa_rbp_deref) row.cfa_expression = true;
        break;
      case 0x14:                                                     // val_offset
      case 0x15: {                                                   // val_offset_sf
        const uint64_t reg = r.uleb();
        if (op == 0x14) r.uleb(); else r.sleb();
        if (!set_reg(reg, RegRule::Other, 0)) return false;
        break;
      }
      case 0x2e: r.uleb(); break;  // GNU_args_size: the callee pops; the CFA already says so
      case 0x2f: {                 // GNU_negative_offset_extended
        const uint64_t reg = r.uleb();
        if (!set_reg(reg, RegRule::Offset, -static_cast<int64_t>(r.uleb()) * cie.data_align)) return false;
        break;
      }
      default: *why = Decline::Opcode; return false;  // vendor or newer opcodes
    }
  }
  if (r.bad) *why = Decline::BadEntry;
  return !r.bad;
}

FrameRule declined(Decline why) {
  FrameRule rule;
  rule.why = why;
  return rule;
}

FrameRule to_rule(const RowState& row) {
  FrameRule rule;
  if (row.ra_undefined) {
    rule.kind = FrameRule::Kind::Outermost;
    return rule;
  }
  if (row.cfa_expression) return declined(Decline::CfaExpression);
  if (row.ra != RegRule::Offset || row.ra_offset != -8) return declined(Decline::ReturnAddress);
  if (row.rbp == RegRule::Other) return declined(Decline::RbpElsewhere);
  // rbp saved relative to itself only with the CFA read through rbp (a DRAP
  // frame), and relative to the CFA only without: one base per rule kind.
  if ((row.rbp == RegRule::AtRbp) != (row.cfa_rbp_deref && row.rbp != RegRule::Same))
    return declined(Decline::RbpElsewhere);
  if (row.cfa_offset < INT32_MIN || row.cfa_offset > INT32_MAX) return declined(Decline::Offsets);
  if (row.rbp_offset < INT32_MIN || row.rbp_offset > INT32_MAX) return declined(Decline::Offsets);
  if (row.cfa_rbp_deref) rule.kind = FrameRule::Kind::RbpDeref;
  else if (row.cfa_reg == kRsp) rule.kind = FrameRule::Kind::RspBased;
  else if (row.cfa_reg == kRbp) rule.kind = FrameRule::Kind::RbpBased;
  else return declined(Decline::CfaRegister);
  rule.cfa_offset = static_cast<int32_t>(row.cfa_offset);
  rule.rbp_saved = row.rbp == RegRule::Offset || row.rbp == RegRule::AtRbp;
  rule.rbp_offset = rule.rbp_saved ? static_cast<int32_t>(row.rbp_offset) : 0;
  return rule;
}

}  // namespace

FrameRule rule_from_fde(const uint8_t* fde, const uint8_t* begin_bound, const uint8_t* end, uintptr_t pc) {
  const FrameRule bad = declined(Decline::BadEntry);
  if (fde < begin_bound || fde >= end) return bad;
  Reader r{fde, end};
  const uint8_t* body_end = nullptr;
  if (!entry_bounds(r, &body_end)) return bad;
  r.end = body_end;
  const uint8_t* id_at = r.p;
  const uint32_t cie_delta = r.fixed<uint32_t>();
  if (r.bad || cie_delta == 0 || cie_delta > static_cast<uint64_t>(id_at - begin_bound)) return bad;
  // The CIE pointer counts back from its own field; the CIE precedes the FDE.
  const uint8_t* cie_at = id_at - cie_delta;
  Cie cie;
  bool signal = false;
  if (!parse_cie(cie_at, end, cie, &signal)) return signal ? declined(Decline::SignalFrame) : bad;
  const uint64_t begin = r.pointer(cie.fde_encoding);
  const uint64_t range = r.pointer(cie.fde_encoding & 0x0f);
  if (r.bad) return bad;
  if (pc < begin || pc - begin >= range) return declined(Decline::NoFde);
  if (cie.augmented) r.skip(r.uleb());
  if (r.bad) return bad;

  RowState row;
  Reader ci{cie.instructions, cie.end};
  Decline why = Decline::None;
  // The CIE's instructions describe the state at the function's first byte.
  if (!run_instructions(ci, cie, 0, UINT64_MAX, row, row, &why)) return declined(why);
  const RowState initial = row;
  if (!run_instructions(r, cie, begin, pc, row, initial, &why)) return declined(why);
  return to_rule(row);
}

namespace {

struct FindRequest {
  uintptr_t pc;
  FdeLocation found;
};

// The loaded segment of `info` that holds `addr`: false when none does.
bool segment_of(const dl_phdr_info* info, uintptr_t addr, FdeLocation& out) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (addr >= lo && addr < hi) {
      out.begin = reinterpret_cast<const uint8_t*>(lo);
      out.end = reinterpret_cast<const uint8_t*>(hi);
      return true;
    }
  }
  return false;
}

int find_in_object(dl_phdr_info* info, size_t, void* data) {
  auto* req = static_cast<FindRequest*>(data);
  const ElfW(Phdr)* eh = nullptr;
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_GNU_EH_FRAME) eh = &ph;
    if (ph.p_type == PT_LOAD) {
      const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
      if (req->pc >= lo && req->pc < lo + ph.p_memsz) holds = true;
    }
  }
  if (!holds) return 0;
  req->found.why = Decline::NoTable;
  if (!eh) return 1;  // the object holds pc but has no table: not found
  const auto* hdr = reinterpret_cast<const uint8_t*>(info->dlpi_addr + eh->p_vaddr);
  const uint8_t* hdr_end = hdr + eh->p_memsz;
  // version, eh_frame_ptr encoding, fde_count encoding, table encoding; then
  // the eh_frame pointer, the count and the sorted (initial location, FDE)
  // pairs. Every linker writes the count as udata4 and the table as datarel
  // sdata4 relative to the header: nothing else is searched.
  if (eh->p_memsz < 12 || hdr[0] != 1 || hdr[2] != kPeUdata4 || hdr[3] != (kPeDatarel | kPeSdata4)) return 1;
  Reader r{hdr + 4, hdr_end};
  r.pointer(hdr[1] & 0x7f);  // the eh_frame pointer (pcrel or absolute): not needed
  const uint32_t count = r.fixed<uint32_t>();
  if (r.bad || count == 0 || static_cast<uint64_t>(count) * 8 > static_cast<uint64_t>(hdr_end - r.p)) return 1;
  const auto* table = reinterpret_cast<const int32_t*>(r.p);
  const auto base = reinterpret_cast<intptr_t>(hdr);
  // The last entry whose initial location is <= pc.
  uint32_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    int32_t start;
    std::memcpy(&start, table + 2 * mid, sizeof start);
    if (static_cast<uintptr_t>(base + start) <= req->pc) lo = mid;
    else hi = mid;
  }
  int32_t start, fde;
  std::memcpy(&start, table + 2 * lo, sizeof start);
  std::memcpy(&fde, table + 2 * lo + 1, sizeof fde);
  req->found.why = Decline::NoFde;
  if (static_cast<uintptr_t>(base + start) > req->pc) return 1;
  const auto* at = reinterpret_cast<const uint8_t*>(base + fde);
  FdeLocation loc;
  if (segment_of(info, reinterpret_cast<uintptr_t>(at), loc)) {
    loc.fde = at;
    loc.why = Decline::None;
    req->found = loc;
  }
  return 1;
}

}  // namespace

FdeLocation find_fde(uintptr_t pc) {
  FindRequest req{pc, {}};
  dl_iterate_phdr(find_in_object, &req);
  return req.found;
}

FrameRule lookup_rule(uintptr_t pc) {
  const FdeLocation at = find_fde(pc);
  return at.fde ? rule_from_fde(at.fde, at.begin, at.end, pc) : declined(at.why);
}

const char* decline_name(Decline d) {
  switch (d) {
    case Decline::None: return "no reason";
    case Decline::NoObject: return "code in no loaded object";
    case Decline::NoTable: return "an object without an .eh_frame search table";
    case Decline::NoFde: return "code without an .eh_frame entry";
    case Decline::BadEntry: return "an .eh_frame entry it could not read";
    case Decline::SignalFrame: return "a signal frame";
    case Decline::CfaExpression: return "a CFA expression";
    case Decline::CfaRegister: return "a CFA in another register";
    case Decline::ReturnAddress: return "a return address not at CFA-8";
    case Decline::RbpElsewhere: return "rbp kept in another register";
    case Decline::Opcode: return "a CFA instruction it does not follow";
    case Decline::Offsets: return "offsets too large";
    case Decline::TableFull: return "a full rule table";
    case Decline::OffStack: return "a frame outside the thread's stack";
    case Decline::ForeignStack: return "a walk from outside the thread's stack";
    case Decline::TooDeep: return "too many frames";
    case Decline::Count_: break;
  }
  return "?";
}

}  // namespace cuxfer::shim::unwind
