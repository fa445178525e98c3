// HttpGet: a minimal HTTP/1.0 GET over a plain socket, for tests that read `/metrics` and
// Prometheus' query API (no curl dependency). Reads the whole answer until the server closes.
// Errors: UNAVAILABLE when the connection fails, DEADLINE_EXCEEDED after `timeout`,
// INTERNAL for an answer that is not HTTP, FAILED_PRECONDITION with the status line for a
// status other than 200. Thread model: none (a free function).
#ifndef LOCKSTEP_COMMON_HTTP_GET_H_
#define LOCKSTEP_COMMON_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

// The body of `http://host:port<path>` (`host`: an IPv4 address or a name).
absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(5));

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_HTTP_GET_H_
