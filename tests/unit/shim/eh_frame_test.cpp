// rule_from_fde on hand-built CIEs and FDEs: the rows a compiler emits for a
// frame-pointer function, remember/restore state, and everything the fast
// walk must refuse (a CFA expression, a signal frame, rbp in a register,
// corrupt lengths, a pc outside the FDE); lookup_rule on this binary's code.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "unwind/eh_frame.h"

namespace cuxfer::shim::unwind {
namespace {

using Kind = FrameRule::Kind;

// Builds one CIE and one FDE in a buffer, with pc-relative FDE addresses
// (encoding 0x1b, as GCC and Clang write them) for a stand-in function 1 MiB
// past the buffer (rule_from_fde never reads the code; a real address could
// be more than the 2 GiB a 4-byte pc-relative field reaches from the heap).
class EhFrame {
 public:
  // `aug` is the augmentation string ("zR", "zRS", ...); `cie_ops` the CIE's
  // initial instructions.
  EhFrame(uint32_t code_size, std::vector<uint8_t> fde_ops, std::string aug = "zR",
          std::vector<uint8_t> cie_ops = {0x0c, 0x07, 0x08, 0x90, 0x01}) {
    buf_.reserve(4096);  // pointers into it are taken below: no reallocation
    code_ = reinterpret_cast<uintptr_t>(buf_.data()) + (1u << 20);
    const uintptr_t code = code_;
    // CIE
    const size_t cie = buf_.size();
    put32(0);  // length, patched
    put32(0);  // CIE id
    buf_.push_back(1);
    for (char c : aug) buf_.push_back(static_cast<uint8_t>(c));
    buf_.push_back(0);
    buf_.push_back(1);     // code alignment
    buf_.push_back(0x78);  // data alignment -8
    buf_.push_back(16);    // return address column
    if (!aug.empty() && aug[0] == 'z') {
      buf_.push_back(1);     // augmentation data length
      buf_.push_back(0x1b);  // 'R': pcrel sdata4
    }
    buf_.insert(buf_.end(), cie_ops.begin(), cie_ops.end());
    while ((buf_.size() - cie) % 8 != 0) buf_.push_back(0);  // DW_CFA_nop
    patch32(cie, static_cast<uint32_t>(buf_.size() - cie - 4));
    // FDE
    fde_ = buf_.size();
    put32(0);
    put32(static_cast<uint32_t>(buf_.size() - cie));  // back to the CIE from this field
    const auto field = reinterpret_cast<uintptr_t>(buf_.data() + buf_.size());
    put32(static_cast<uint32_t>(static_cast<int32_t>(code - field)));
    put32(code_size);
    buf_.push_back(0);  // augmentation data length
    buf_.insert(buf_.end(), fde_ops.begin(), fde_ops.end());
    while ((buf_.size() - fde_) % 8 != 0) buf_.push_back(0);
    patch32(fde_, static_cast<uint32_t>(buf_.size() - fde_ - 4));
  }

  // The rule `offset` bytes into the stand-in function (negative: before it).
  FrameRule at(int64_t offset) const {
    return rule_from_fde(buf_.data() + fde_, buf_.data(), buf_.data() + buf_.size(), code_ + offset);
  }
  uintptr_t code() const { return code_; }
  std::vector<uint8_t>& bytes() { return buf_; }
  size_t fde_offset() const { return fde_; }

 private:
  void put32(uint32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    buf_.insert(buf_.end(), b, b + 4);
  }
  void patch32(size_t at, uint32_t v) { std::memcpy(buf_.data() + at, &v, 4); }
  std::vector<uint8_t> buf_;
  size_t fde_ = 0;
  uintptr_t code_ = 0;
};

FrameRule rsp(int32_t off) { return {Kind::RspBased, false, off, 0}; }
FrameRule rsp_saved(int32_t off, int32_t rbp) { return {Kind::RspBased, true, off, rbp}; }
FrameRule rbp_based(int32_t off, int32_t rbp) { return {Kind::RbpBased, true, off, rbp}; }

// push %rbp; mov %rsp,%rbp; ...; leave; ret
const std::vector<uint8_t> kFramePointerFunction = {
    0x41,              // advance 1 (after push %rbp)
    0x0e, 0x10,        // def_cfa_offset 16
    0x86, 0x02,        // rbp at cfa-16
    0x43,              // advance 3 (after mov %rsp,%rbp)
    0x0d, 0x06,        // def_cfa_register rbp
    0x02, 0x20,        // advance 32 (after leave)
    0x0c, 0x07, 0x08,  // def_cfa rsp+8
};

TEST(EhFrame, FramePointerFunctionRowByRow) {
  EhFrame f(64, kFramePointerFunction);
  EXPECT_EQ(f.at(0), rsp(8));
  EXPECT_EQ(f.at(1), rsp_saved(16, -16));
  EXPECT_EQ(f.at(3), rsp_saved(16, -16));
  EXPECT_EQ(f.at(4), rbp_based(16, -16));
  EXPECT_EQ(f.at(35), rbp_based(16, -16));
  // After leave the CFA is rsp+8 again; rbp's rule (its slot) stands.
  EXPECT_EQ(f.at(36), rsp_saved(8, -16));
  EXPECT_EQ(f.at(63), rsp_saved(8, -16));
}

TEST(EhFrame, PcOutsideTheFdeIsRefused) {
  EhFrame f(64, kFramePointerFunction);
  EXPECT_EQ(f.at(-1).kind, Kind::Unsupported);
  EXPECT_EQ(f.at(64).kind, Kind::Unsupported);
}

TEST(EhFrame, RememberAndRestoreStateIncludeTheCfa) {
  // sub $24,%rsp; ...; remember; add $24; ret (cfa 8); restore (cfa 32 again)
  EhFrame f(64,
            {0x44, 0x0e, 0x20,  // advance 4, cfa rsp+32
             0x4a, 0x0a,        // advance 10, remember_state
             0x0e, 0x08,        // cfa rsp+8
             0x41, 0x0b});      // advance 1, restore_state
  EXPECT_EQ(f.at(4), rsp(32));
  EXPECT_EQ(f.at(14), rsp(8));
  EXPECT_EQ(f.at(15), rsp(32));
}

TEST(EhFrame, RestoreReturnsTheCieRule) {
  EhFrame f(32, {0x41, 0x0e, 0x10, 0x86, 0x02, 0x41, 0xc6});  // ..., restore rbp
  EXPECT_EQ(f.at(1), rsp_saved(16, -16));
  EXPECT_EQ(f.at(2), rsp(16));
}

TEST(EhFrame, LargeAdvancesAndSignedForms) {
  EhFrame f(0x30000,
            {0x03, 0x00, 0x01,        // advance2 256
             0x13, 0x7e,              // def_cfa_offset_sf -2 * -8 = 16
             0x04, 0x00, 0x00, 0x02, 0x00,  // advance4 0x20000
             0x12, 0x06, 0x7e,        // def_cfa_sf rbp, 16
             0x11, 0x06, 0x7e});      // offset_extended_sf rbp, 16 (above the CFA)
  EXPECT_EQ(f.at(255), rsp(8));
  EXPECT_EQ(f.at(256), rsp(16));
  EXPECT_EQ(f.at(0x20100), rbp_based(16, 16));
}

TEST(EhFrame, UndefinedReturnAddressIsTheOutermostFrame) {
  EhFrame f(16, {0x07, 0x10});  // undefined rip (_start, clone's child)
  EXPECT_EQ(f.at(2).kind, Kind::Outermost);
}

// Unsupported, and why (the reason the trace's note gives).
::testing::AssertionResult declined_for(const FrameRule& r, Decline why) {
  if (r.kind != Kind::Unsupported) return ::testing::AssertionFailure() << "not Unsupported";
  if (r.why != why)
    return ::testing::AssertionFailure() << "declined for " << decline_name(r.why) << ", not " << decline_name(why);
  return ::testing::AssertionSuccess();
}

TEST(EhFrame, AFrameRealignedThroughADrapRegister) {
  // GCC's prologue for over-aligned locals: CFA = r10 while realigning, then
  // DW_CFA_expression r6: breg6 0, DW_CFA_def_cfa_expression: breg6 -24; deref.
  const std::vector<uint8_t> drap = {0x45, 0x0c, 0x0a, 0x00,            // +5: CFA = r10 + 0
                                     0x44, 0x10, 0x06, 0x02, 0x76, 0x00,  // +4: rbp saved at rbp + 0
                                     0x44, 0x0f, 0x03, 0x76, 0x68, 0x06,  // +4: CFA = *(rbp - 24)
                                     0x48, 0x0c, 0x07, 0x08};             // +8: CFA = rsp + 8 (epilogue)
  EhFrame f(32, drap);
  EXPECT_TRUE(declined_for(f.at(6), Decline::CfaRegister));  // realigning: not a return address
  EXPECT_TRUE(declined_for(f.at(10), Decline::RbpElsewhere));
  FrameRule r = f.at(14);
  EXPECT_EQ(r.kind, Kind::RbpDeref);
  EXPECT_EQ(r.cfa_offset, -24);
  EXPECT_TRUE(r.rbp_saved);
  EXPECT_EQ(r.rbp_offset, 0);
  // At the final ret rbp's rule is still the expression: declined, and never a return address.
  EXPECT_TRUE(declined_for(f.at(22), Decline::RbpElsewhere));
  // Other expressions are still declined: a CFA not dereferenced, another
  // base register, trailing operations; rbp saved at rbp with a CFA-based CFA.
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0f, 0x02, 0x76, 0x68}).at(0), Decline::CfaExpression));
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0f, 0x03, 0x77, 0x68, 0x06}).at(0), Decline::CfaExpression));
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0f, 0x04, 0x76, 0x68, 0x06, 0x06}).at(0), Decline::CfaExpression));
  EXPECT_TRUE(declined_for(EhFrame(16, {0x10, 0x06, 0x02, 0x76, 0x00}).at(0), Decline::RbpElsewhere));
  // A CFA read through rbp with rbp saved relative to the CFA: not one rule kind.
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0f, 0x03, 0x76, 0x68, 0x06, 0x86, 0x02}).at(0), Decline::RbpElsewhere));
  // def_cfa_offset after an expression is malformed.
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0f, 0x03, 0x76, 0x68, 0x06, 0x0e, 0x10}).at(0), Decline::CfaExpression));
}

TEST(EhFrame, WhatTheWalkDoesNotFollowIsUnsupported) {
  // A CFA expression (PLT entries: rsp + 8 + ((rip & 15) >= 11) * 8, abridged).
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0f, 0x02, 0x77, 0x08}).at(0), Decline::CfaExpression));
  // The CFA in another register (r10, as in a realigning prologue).
  EXPECT_TRUE(declined_for(EhFrame(16, {0x0c, 0x0a, 0x00}).at(0), Decline::CfaRegister));
  // rbp kept in another register, or computed.
  EXPECT_TRUE(declined_for(EhFrame(16, {0x09, 0x06, 0x03}).at(0), Decline::RbpElsewhere));
  EXPECT_TRUE(declined_for(EhFrame(16, {0x16, 0x06, 0x01, 0x9c}).at(0), Decline::RbpElsewhere));
  // The return address elsewhere than CFA-8.
  EXPECT_TRUE(declined_for(EhFrame(16, {0x90, 0x02}).at(0), Decline::ReturnAddress));
  // A signal frame.
  EXPECT_TRUE(declined_for(EhFrame(16, {}, "zRS").at(0), Decline::SignalFrame));
  // An unknown augmentation, and an unknown opcode.
  EXPECT_TRUE(declined_for(EhFrame(16, {}, "zRX").at(0), Decline::BadEntry));
  EXPECT_TRUE(declined_for(EhFrame(16, {0x3c}).at(0), Decline::Opcode));
  // rsp restored from memory.
  EXPECT_TRUE(declined_for(EhFrame(16, {0x87, 0x01}).at(0), Decline::CfaRegister));
  // A pc outside the FDE.
  EXPECT_TRUE(declined_for(EhFrame(16, {}).at(-1), Decline::NoFde));
  // rbp's rule in the rows past pc does not matter.
  EXPECT_EQ(EhFrame(16, {0x48, 0x09, 0x06, 0x03}).at(7), rsp(8));
  // Every reason has words for the note.
  for (unsigned i = 0; i < kDeclineKinds; ++i) EXPECT_STRNE(decline_name(static_cast<Decline>(i)), "?");
}

TEST(EhFrame, CorruptEntriesAreRefusedWithoutReadingPastTheBuffer) {
  EhFrame f(64, kFramePointerFunction);
  auto& b = f.bytes();
  const size_t fde = f.fde_offset();
  const uintptr_t pc = f.code() + 4;
  const auto rule = [&] { return rule_from_fde(b.data() + fde, b.data(), b.data() + b.size(), pc); };
  ASSERT_EQ(rule().kind, Kind::RbpBased);
  const std::vector<uint8_t> good = b;
  // An FDE length past the end.
  uint32_t big = 0x7fffffff;
  std::memcpy(b.data() + fde, &big, 4);
  EXPECT_TRUE(declined_for(rule(), Decline::BadEntry));
  b = good;
  // A CIE pointer before the buffer.
  std::memcpy(b.data() + fde + 4, &big, 4);
  EXPECT_EQ(rule().kind, Kind::Unsupported);
  b = good;
  // A zero length (a terminator) and a CIE id that is not 0.
  uint32_t zero = 0, one = 1;
  std::memcpy(b.data() + fde, &zero, 4);
  EXPECT_EQ(rule().kind, Kind::Unsupported);
  b = good;
  std::memcpy(b.data() + 4, &one, 4);
  EXPECT_EQ(rule().kind, Kind::Unsupported);
  b = good;
  // Every truncation of the buffer: refused or right, never a read past it.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    const FrameRule r = rule_from_fde(b.data() + fde, b.data(), b.data() + cut, pc);
    EXPECT_TRUE(r.kind == Kind::Unsupported || r == rbp_based(16, -16)) << "cut at " << cut;
  }
}

// This binary's own code, through the loader's tables.
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }

TEST(EhFrame, LookupRuleFindsThisBinarysFunctions) {
  const auto pc = reinterpret_cast<uintptr_t>(&leaf);
  const FdeLocation at = find_fde(pc);
  ASSERT_NE(at.fde, nullptr);
  EXPECT_LT(at.begin, at.fde);
  EXPECT_LT(at.fde, at.end);
  // At a function's first byte: CFA = rsp + 8, the return address just pushed.
  EXPECT_EQ(lookup_rule(pc), rsp(8));
  // libc's memcpy too (another object).
  EXPECT_NE(find_fde(reinterpret_cast<uintptr_t>(&std::memcpy)).fde, nullptr);
  // No object holds a heap address.
  std::vector<int> heap(4);
  EXPECT_EQ(find_fde(reinterpret_cast<uintptr_t>(heap.data())).fde, nullptr);
  EXPECT_TRUE(declined_for(lookup_rule(reinterpret_cast<uintptr_t>(heap.data())), Decline::NoObject));
}

}  // namespace
}  // namespace cuxfer::shim::unwind
