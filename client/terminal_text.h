// EscapeForTerminal: text that came from a worker (log lines, error messages, reasons,
// addresses) made safe to print on a terminal. Workers' text is stored by the coordinator as
// given; a worker, or whoever holds its certificate, could put terminal escape sequences in
// it (clear the screen, rewrite earlier lines with CR, set the window title, hide text).
// Every control character but newline and tab is shown as an escape instead: ESC as "\x1b",
// CR as "\r", DEL as "\x7f", and C1 controls (U+0080..U+009F, which some terminals obey too)
// as "\u0085". Printable text, UTF-8 included, passes unchanged. Escaping twice changes
// nothing more (the escapes are printable).
// Thread model: a pure function.
#ifndef LOCKSTEP_CLIENT_TERMINAL_TEXT_H_
#define LOCKSTEP_CLIENT_TERMINAL_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace lockstep {
namespace client {

std::string EscapeForTerminal(absl::string_view text);

}  // namespace client
}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_TERMINAL_TEXT_H_
