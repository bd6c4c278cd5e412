// How to step out of a frame on x86-64, read from the code's own .eh_frame:
// the CFA rule and where the caller's rbp was saved, for one program counter.
//
// The fast unwinder (fast_unwind.h) needs only what compilers emit for
// ordinary code: the CFA is rsp or rbp plus a constant, the return address is
// at CFA-8, and rbp is unchanged or saved at CFA plus a constant. Anything
// else (a CFA expression, a signal frame, rbp kept in another register, code
// without unwind tables) is `Unsupported`, and the caller falls back to
// libunwind for the whole stack: never a guess.
//
// Pure except for find_fde, which asks the loader which object holds a pc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuxfer::shim::unwind {

struct FrameRule {
  enum class Kind : uint8_t {
    Unsupported = 0,  // not a rule the fast walk follows
    RspBased,         // CFA = rsp + cfa_offset
    RbpBased,         // CFA = rbp + cfa_offset
    Outermost,        // the return address is undefined: the stack ends here
  };
  Kind kind = Kind::Unsupported;
  bool rbp_saved = false;  // else the caller's rbp is this frame's
  int32_t cfa_offset = 0;
  int32_t rbp_offset = 0;  // from the CFA, when rbp_saved

  bool operator==(const FrameRule&) const = default;
};

// The rule in force at `pc` under the FDE at `fde` (a pointer to its length
// field). `pc` must lie in the FDE's range; Unsupported when it does not or
// when the CIE or the instructions hold anything the walk does not follow.
// Every read stays inside [begin, end) (the loaded segment holding the FDE,
// or a test's buffer).
FrameRule rule_from_fde(const uint8_t* fde, const uint8_t* begin, const uint8_t* end, uintptr_t pc);

struct FdeLocation {
  const uint8_t* fde = nullptr;  // null: not found
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
};

// The FDE that covers `pc`, found through the PT_GNU_EH_FRAME table of the
// object that holds it, with the bounds of its segment; fde null (no object,
// no table, a table encoding other than the one every linker writes) otherwise.
// Takes the loader's lock (dl_iterate_phdr).
FdeLocation find_fde(uintptr_t pc);

// find_fde then rule_from_fde.
FrameRule lookup_rule(uintptr_t pc);

}  // namespace cuxfer::shim::unwind
