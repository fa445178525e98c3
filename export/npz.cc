#include "export/npz.h"

#include <zlib.h>

#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lockstep::exporting {
namespace {

void Put16(uint32_t v, std::string* out) {
  out->push_back(static_cast<char>(v & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
}

void Put32(uint32_t v, std::string* out) {
  Put16(v & 0xffff, out);
  Put16(v >> 16, out);
}

// NumPy's type string for `dtype`; empty for one it lacks.
std::string Descr(v1::DType dtype) {
  switch (dtype) {
    case v1::F32:
      return "<f4";
    case v1::F64:
      return "<f8";
    case v1::F16:
      return "<f2";
    case v1::I32:
      return "<i4";
    case v1::I64:
      return "<i8";
    default:
      return "";
  }
}

// Where a member's local header starts, for the central directory.
struct Member {
  std::string name;
  uint32_t crc = 0;
  uint32_t size = 0;
  uint32_t offset = 0;
};

// Fields shared by a local file header and a central directory entry, from "version needed"
// to the extra field's length (stored, no flags, DOS date 1980-01-01 00:00).
void PutCommon(const Member& m, std::string* out) {
  Put16(20, out);    // version needed to extract: 2.0
  Put16(0, out);     // flags
  Put16(0, out);     // compression: stored
  Put16(0, out);     // modification time
  Put16(0x21, out);  // modification date: 1980-01-01
  Put32(m.crc, out);
  Put32(m.size, out);  // compressed size
  Put32(m.size, out);  // uncompressed size
  Put16(static_cast<uint32_t>(m.name.size()), out);
  Put16(0, out);  // extra field length
}

}  // namespace

absl::StatusOr<std::string> EncodeNpy(const v1::NamedTensor& tensor) {
  if (absl::Status s = CheckTensor(tensor); !s.ok()) return s;
  const std::string descr = Descr(tensor.tensor().dtype());
  if (descr.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.name(), ": npz cannot hold ", v1::DType_Name(tensor.tensor().dtype()),
                     " (NumPy has no such dtype); export it as safetensors"));
  }
  const auto& dims = tensor.tensor().shape().dims();
  std::string shape = absl::StrCat("(", absl::StrJoin(dims, ", "), dims.size() == 1 ? ",)" : ")");
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // magic (6) + version (2) + length (2) + header + '\n', a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  Put16(static_cast<uint32_t>(header.size()), &out);
  out += header;
  out += tensor.tensor().content();
  return out;
}

absl::StatusOr<std::string> EncodeNpz(const Weights& weights) {
  constexpr uint64_t kLimit = std::numeric_limits<uint32_t>::max();
  std::string out;
  std::vector<Member> members;
  std::set<std::string> names;
  for (const v1::NamedTensor& t : weights.tensors) {
    absl::StatusOr<std::string> npy = EncodeNpy(t);
    if (!npy.ok()) return npy.status();
    Member m;
    m.name = t.name() + ".npy";
    if (!names.insert(m.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(t.name(), ": the name appears twice"));
    }
    if (m.name.size() > 0xffff || out.size() + 30 + m.name.size() + npy->size() > kLimit) {
      return absl::InvalidArgumentError(absl::StrCat(
          t.name(), ": the archive would pass 4 GiB (npz without zip64); export as safetensors"));
    }
    m.crc = crc32(0L, reinterpret_cast<const Bytef*>(npy->data()), npy->size());
    m.size = static_cast<uint32_t>(npy->size());
    m.offset = static_cast<uint32_t>(out.size());
    Put32(0x04034b50, &out);  // local file header signature
    PutCommon(m, &out);
    out += m.name;
    out += *npy;
    members.push_back(std::move(m));
  }
  const uint64_t directory_offset = out.size();
  for (const Member& m : members) {
    Put32(0x02014b50, &out);  // central directory entry signature
    Put16(20, &out);          // version made by: 2.0, MS-DOS attributes
    PutCommon(m, &out);
    Put16(0, &out);  // comment length
    Put16(0, &out);  // disk number start
    Put16(0, &out);  // internal attributes
    Put32(0, &out);  // external attributes
    Put32(m.offset, &out);
    out += m.name;
  }
  const uint64_t directory_size = out.size() - directory_offset;
  if (out.size() + 22 > kLimit || members.size() > 0xffff) {
    return absl::InvalidArgumentError(
        "the archive would pass 4 GiB or 65535 tensors (npz without zip64); export as "
        "safetensors");
  }
  Put32(0x06054b50, &out);  // end of central directory signature
  Put16(0, &out);           // this disk
  Put16(0, &out);           // disk with the directory
  Put16(static_cast<uint32_t>(members.size()), &out);
  Put16(static_cast<uint32_t>(members.size()), &out);
  Put32(static_cast<uint32_t>(directory_size), &out);
  Put32(static_cast<uint32_t>(directory_offset), &out);
  Put16(0, &out);  // comment length
  return out;
}

absl::Status RegisterNpz(FormatRegistry& registry) {
  return registry.Register({"npz", "NumPy's np.load: one .npy per variable (and slot)",
                            [](const ExportRequest& r) -> absl::StatusOr<std::string> {
                              absl::StatusOr<Weights> w =
                                  WeightsFromCheckpoint(*r.checkpoint, r.options);
                              if (!w.ok()) return w.status();
                              return EncodeNpz(*w);
                            }});
}

}  // namespace lockstep::exporting
