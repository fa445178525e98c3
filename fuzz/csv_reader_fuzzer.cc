// Fuzz target: the CSV reader (data/csv_reader.h) over one file, plain or gzip (zlib reads
// both whatever the name). The first byte picks the reader's options (header, float label,
// delimiter, label column, feature shape); the rest is the file. Every example is read until
// the end or the first error.
//
// The file is a memfd named through /proc/self/fd, created once per process and rewritten for
// every input: nothing is left on disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/csv_reader.h"

namespace {

int InputFd() {
  static const int fd = [] {
    const int fd = memfd_create("csv_reader_fuzzer", 0);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return fd;
  }();
  return fd;
}

lockstep::data::CsvOptions Options(uint8_t bits) {
  static constexpr char kDelimiters[] = {',', ';', '\t', ' '};
  lockstep::data::CsvOptions options;
  options.header = bits & 1;
  options.float_label = bits & 2;
  options.delimiter = kDelimiters[(bits >> 2) & 3];
  static constexpr int kLabelColumns[] = {-1, -2, 0, 1};
  options.label_column = kLabelColumns[(bits >> 4) & 3];
  switch (bits >> 6) {
    case 1:
      options.feature_shape = lockstep::engine::Shape{2, 2};
      break;
    case 2:
      options.feature_shape = lockstep::engine::Shape{3};
      break;
    default:
      break;  // [number of features]
  }
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int fd = InputFd();
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, data + 1, size - 1, 0) != static_cast<ssize_t>(size - 1)) {
    std::perror("writing the memfd");
    std::abort();
  }
  lockstep::data::CsvReader reader({absl::StrCat("/proc/self/fd/", fd)}, Options(data[0]));
  lockstep::data::Element element;
  for (int i = 0; i < 100000; ++i) {
    absl::StatusOr<bool> more = reader.Next(&element);
    if (!more.ok() || !*more) break;
  }
  return 0;
}
