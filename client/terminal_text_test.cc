#include "client/terminal_text.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace client {
namespace {

TEST(TerminalTextTest, ControlCharactersAreShownNotObeyed) {
  EXPECT_EQ(EscapeForTerminal("\x1b[2J\x1b]0;pwned\x07step 5"), "\\x1b[2J\\x1b]0;pwned\\x07step 5");
  EXPECT_EQ(EscapeForTerminal("loss 0.1\rloss 9.9"), "loss 0.1\\rloss 9.9");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(EscapeForTerminal("\b\f\v"), "\\x08\\x0c\\x0b");
  // C1 controls in UTF-8 (U+009B is CSI).
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"
                              "31m"),
            "\\u009b31m");
}

TEST(TerminalTextTest, NewlinesTabsAndPrintableTextPassUnchanged) {
  EXPECT_EQ(EscapeForTerminal("line 1\n\tline 2"), "line 1\n\tline 2");
  EXPECT_EQ(EscapeForTerminal("größe ≤ 4 µs 训练"), "größe ≤ 4 µs 训练");
  EXPECT_EQ(EscapeForTerminal("\xc2\xa0nbsp"), "\xc2\xa0nbsp");  // U+00A0 is printable
  EXPECT_EQ(EscapeForTerminal(""), "");
}

TEST(TerminalTextTest, EscapingTwiceChangesNothingMore) {
  const std::string once = EscapeForTerminal("\x1b[1mbold\r\xc2\x85");
  EXPECT_EQ(EscapeForTerminal(once), once);
}

}  // namespace
}  // namespace client
}  // namespace lockstep
