// python_line() against line tables CPython itself wrote: the function below,
// compiled by 3.10, 3.11, 3.12 and 3.13, its co_linetable and, per
// instruction, the line the interpreter gives (co_lines / co_positions).
//
//   def f(a, b):            # line 2
//       x = a + b
//       if x > 3:
//           y = [i for i in range(x)]
//           return len(y)
//       return print(x,
//                    a)     # line 8
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "trace/python_lines.h"

namespace cuxfer::trace {
namespace {

struct Case {
  uint32_t version;
  int first_line;
  const char* table_hex;
  std::vector<std::pair<uint32_t, int>> lines;  // byte offset -> line (0: none)
};

std::string unhex(const char* h) {
  std::string out;
  for (size_t i = 0; h[i] && h[i + 1]; i += 2) out.push_back(static_cast<char>(std::stoi(std::string(h + i, 2), nullptr, 16)));
  return out;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
  {0x030a, 2, "08010801120108010401020104ff",
   {{0, 3}, {2, 3}, {4, 3}, {6, 3}, {8, 4}, {10, 4}, {12, 4}, {14, 4}, {16, 5}, {18, 5}, {20, 5}, {22, 5}, {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5}, {34, 6}, {36, 6}, {38, 6}, {40, 6}, {42, 7}, {44, 7}, {46, 8}, {48, 7}, {50, 7}}},
  {0x030b, 2, "8000d80809884189058041d80708883182758075d80c21d00c219d05986199089c08d00c21d10c21d40c218801dd0f12903189768c76880ddd0b109011d81112f103010c14f400010c14f000010514",
   {{0, 2}, {2, 3}, {4, 3}, {6, 3}, {8, 3}, {10, 3}, {12, 4}, {14, 4}, {16, 4}, {18, 4}, {20, 4}, {22, 4}, {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5}, {34, 5}, {36, 5}, {38, 5}, {40, 5}, {42, 5}, {44, 5}, {46, 5}, {48, 5}, {50, 5}, {52, 5}, {54, 5}, {56, 5}, {58, 5}, {60, 5}, {62, 5}, {64, 5}, {66, 5}, {68, 5}, {70, 5}, {72, 5}, {74, 6}, {76, 6}, {78, 6}, {80, 6}, {82, 6}, {84, 6}, {86, 6}, {88, 6}, {90, 6}, {92, 6}, {94, 6}, {96, 6}, {98, 6}, {100, 6}, {102, 6}, {104, 7}, {106, 7}, {108, 7}, {110, 7}, {112, 7}, {114, 7}, {116, 7}, {118, 8}, {120, 7}, {122, 7}, {124, 7}, {126, 7}, {128, 7}, {130, 7}, {132, 7}, {134, 7}}},
  {0x030c, 2, "8000d80809884189058041d8070888318275dc181d98619b08d60c2190318a51d00c218801d00c21dc0f1290318b76880ddc0b109011d81112f303010c14f000010514f9f205000d22",
   {{0, 2}, {2, 3}, {4, 3}, {6, 3}, {8, 3}, {10, 3}, {12, 4}, {14, 4}, {16, 4}, {18, 4}, {20, 4}, {22, 5}, {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5}, {34, 5}, {36, 5}, {38, 5}, {40, 5}, {42, 5}, {44, 5}, {46, 5}, {48, 5}, {50, 5}, {52, 5}, {54, 5}, {56, 5}, {58, 5}, {60, 5}, {62, 5}, {64, 5}, {66, 5}, {68, 5}, {70, 6}, {72, 6}, {74, 6}, {76, 6}, {78, 6}, {80, 6}, {82, 6}, {84, 6}, {86, 6}, {88, 6}, {90, 6}, {92, 7}, {94, 7}, {96, 7}, {98, 7}, {100, 7}, {102, 7}, {104, 8}, {106, 7}, {108, 7}, {110, 7}, {112, 7}, {114, 7}, {116, 0}, {118, 0}, {120, 5}, {122, 5}, {124, 5}}},
  {0x030d, 2, "8000d8080989058041d8070888318375dc181d98619c08d30c21990890318a5199088801d00c21dc0f1290318b76880ddc0b109011d81112f303010c14f000010514f9f205000d22",
   {{0, 2}, {2, 3}, {4, 3}, {6, 3}, {8, 3}, {10, 4}, {12, 4}, {14, 4}, {16, 4}, {18, 4}, {20, 4}, {22, 5}, {24, 5}, {26, 5}, {28, 5}, {30, 5}, {32, 5}, {34, 5}, {36, 5}, {38, 5}, {40, 5}, {42, 5}, {44, 5}, {46, 5}, {48, 5}, {50, 5}, {52, 5}, {54, 5}, {56, 5}, {58, 5}, {60, 5}, {62, 5}, {64, 5}, {66, 5}, {68, 5}, {70, 5}, {72, 6}, {74, 6}, {76, 6}, {78, 6}, {80, 6}, {82, 6}, {84, 6}, {86, 6}, {88, 6}, {90, 6}, {92, 6}, {94, 7}, {96, 7}, {98, 7}, {100, 7}, {102, 7}, {104, 7}, {106, 8}, {108, 7}, {110, 7}, {112, 7}, {114, 7}, {116, 7}, {118, 0}, {120, 0}, {122, 5}, {124, 5}, {126, 5}}},
  };
  return c;
}

TEST(PythonLines, EveryInstructionOfEveryVersion) {
  for (const Case& c : cases()) {
    const std::string table = unhex(c.table_hex);
    for (const auto& [offset, line] : c.lines)
      EXPECT_EQ(python_line(c.version, c.first_line, table, offset), line)
          << "version " << std::hex << c.version << std::dec << " offset " << offset;
  }
}

TEST(PythonLines, PastTheEndOrUnknownVersionIsNoLine) {
  for (const Case& c : cases()) {
    const std::string table = unhex(c.table_hex);
    EXPECT_EQ(python_line(c.version, c.first_line, table, 100000), 0);
  }
  EXPECT_EQ(python_line(0x0309, 1, "\x02\x01", 0), 0);
}

TEST(PythonLines, CorruptTablesNeverReadPastTheEnd) {
  // A header byte without bit 7, a long form cut short, a varint that never ends.
  EXPECT_EQ(python_line(0x030b, 1, std::string("\x01", 1), 0), 0);
  EXPECT_EQ(python_line(0x030b, 1, std::string("\xf0", 1), 0), 0);
  EXPECT_EQ(python_line(0x030b, 1, std::string("\xf0\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", 13), 0), 0);
  EXPECT_EQ(python_line(0x030a, 1, std::string("\x08", 1), 0), 0);
}

}  // namespace
}  // namespace cuxfer::trace
