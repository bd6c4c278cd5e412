// How to step out of a frame on x86-64, read from the code's own .eh_frame:
// the CFA rule and where the caller's rbp was saved, for one program counter.
//
// The fast unwinder (fast_unwind.h) needs only what compilers emit for
// ordinary code: the CFA is rsp or rbp plus a constant, the return address is
// at CFA-8, and rbp is unchanged or saved at CFA plus a constant; and, for a
// function that realigns its stack through a DRAP register (cuBLAS's
// kernels-selection code, anything with over-aligned locals), the CFA saved at
// rbp plus a constant and rbp saved at rbp. Anything else (another CFA
// expression, a signal frame, rbp kept in another register, code without
// unwind tables) is `Unsupported`, and the caller falls back to libunwind for
// the whole stack: never a guess.
//
// Pure except for find_fde, which asks the loader which object holds a pc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuxfer::shim::unwind {

// Why a frame could not be stepped: the rule's (from the table) or the
// walk's own. Counted per stack the walk declines, and said in the trace's
// call-stack note, so that a program whose stacks fall back says why.
enum class Decline : uint8_t {
  None = 0,
  NoObject,       // no loaded object holds the pc (JIT code, a corrupt chain)
  NoTable,        // the object has no PT_GNU_EH_FRAME search table the walk reads
  NoFde,          // the table has no entry covering the pc
  BadEntry,       // a CIE or FDE the reader refused (corrupt, unknown augmentation)
  SignalFrame,    // an 'S' CIE: the registers are in a ucontext
  CfaExpression,  // DW_CFA_def_cfa_expression (realigned stacks, PLT entries)
  CfaRegister,    // the CFA from a register other than rsp or rbp
  ReturnAddress,  // the return address not at CFA-8
  RbpElsewhere,   // the caller's rbp in another register or given by an expression
  Opcode,         // a CFA instruction the walk does not follow
  Offsets,        // offsets too large for the packed rule
  TableFull,      // the rule table had no room for the pc
  OffStack,       // a read that would leave the thread's stack, or a frame below the last
  ForeignStack,   // the walk started outside the thread's own stack (a fiber, a signal stack)
  TooDeep,        // more frames than the bound on a walk
  Count_
};
constexpr unsigned kDeclineKinds = static_cast<unsigned>(Decline::Count_);
// A few words for the note ("a CFA expression").
const char* decline_name(Decline d);

struct FrameRule {
  enum class Kind : uint8_t {
    Unsupported = 0,  // not a rule the fast walk follows
    RspBased,         // CFA = rsp + cfa_offset
    RbpBased,         // CFA = rbp + cfa_offset
    Outermost,        // the return address is undefined: the stack ends here
    RbpDeref,         // CFA = *(rbp + cfa_offset): a frame realigned through a DRAP register
  };
  Kind kind = Kind::Unsupported;
  bool rbp_saved = false;  // else the caller's rbp is this frame's
  int32_t cfa_offset = 0;
  int32_t rbp_offset = 0;  // when rbp_saved: from the CFA, or from rbp itself under RbpDeref
  Decline why = Decline::None;  // when Unsupported

  bool operator==(const FrameRule&) const = default;
};

// The rule in force at `pc` under the FDE at `fde` (a pointer to its length
// field). `pc` must lie in the FDE's range; Unsupported when it does not or
// when the CIE or the instructions hold anything the walk does not follow.
// Every read stays inside [begin, end) (the loaded segment holding the FDE,
// or a test's buffer).
FrameRule rule_from_fde(const uint8_t* fde, const uint8_t* begin, const uint8_t* end, uintptr_t pc);

struct FdeLocation {
  const uint8_t* fde = nullptr;  // null: not found (why says why)
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  Decline why = Decline::NoObject;
};

// The FDE that covers `pc`, found through the PT_GNU_EH_FRAME table of the
// object that holds it, with the bounds of its segment; fde null (no object,
// no table, a table encoding other than the one every linker writes) otherwise.
// Takes the loader's lock (dl_iterate_phdr).
FdeLocation find_fde(uintptr_t pc);

// find_fde then rule_from_fde.
FrameRule lookup_rule(uintptr_t pc);

}  // namespace cuxfer::shim::unwind
