// Fuzz target: the checkpoint reader (checkpoint/checkpoint.h): CheckpointManager::Decode on
// a file's bytes, then every tensor through engine::Tensor::FromProto as a restore does. The
// first byte chooses how the rest is used: odd, it is taken as the payload and framed with a
// valid header (magic, version, length, both CRCs) so the protobuf and the tensors behind the
// CRC checks are reached; even, the rest is the whole file as it lies on disk.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint.h"
#include "common/crc32c.h"
#include "engine/tensor.h"
#include "google/protobuf/stubs/logging.h"

namespace {

using lockstep::checkpoint::CheckpointManager;

void PutLe32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

void PutLe64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

// The on-disk framing of `payload` as a version 1 file (one serialized Checkpoint), which
// CheckpointManager still reads; unframed inputs reach the version 2 payload parser too.
std::string Frame(absl::string_view payload) {
  std::string file(CheckpointManager::kHeaderSize, '\0');
  PutLe32(&file[0], CheckpointManager::kMagic);
  PutLe32(&file[4], CheckpointManager::kProtoPayloadVersion);
  PutLe64(&file[8], payload.size());
  PutLe32(&file[16], lockstep::MaskCrc32c(lockstep::Crc32c(payload)));
  PutLe32(&file[20], lockstep::MaskCrc32c(lockstep::Crc32c(file.data(), 20)));
  file.append(payload.data(), payload.size());
  return file;
}

}  // namespace

// Invalid UTF-8 in a string field is refused by the protobuf parser with a log line per
// input: silence protobuf's log so the fuzzer's own output stays readable and fast.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string file = (data[0] & 1) ? Frame(rest) : std::string(rest);
  absl::StatusOr<lockstep::v1::Checkpoint> checkpoint = CheckpointManager::Decode(file);
  if (!checkpoint.ok()) return 0;
  for (const auto* list : {&checkpoint->variables(), &checkpoint->optimizer_slots()}) {
    for (const lockstep::v1::NamedTensor& named : *list) {
      (void)lockstep::engine::Tensor::FromProto(named.tensor());
    }
  }
  // What decodes must encode to a file that decodes to the same checkpoint.
  absl::StatusOr<std::string> encoded = CheckpointManager::Encode(*checkpoint);
  if (!encoded.ok()) std::abort();
  absl::StatusOr<lockstep::v1::Checkpoint> again = CheckpointManager::Decode(*encoded);
  if (!again.ok() || again->SerializeAsString() != checkpoint->SerializeAsString()) std::abort();
  return 0;
}
