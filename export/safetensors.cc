#include "export/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace lockstep::exporting {
namespace {

constexpr char kMetadataKey[] = "__metadata__";

void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(absl::string_view bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", what));
}

// One entry of the header, before its bytes are copied.
struct Entry {
  std::string name;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  v1::TensorShape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

absl::StatusOr<Entry> ParseEntry(const std::string& name, const nlohmann::json& j) {
  Entry e;
  e.name = name;
  auto field = [&](const char* key) -> absl::StatusOr<const nlohmann::json*> {
    auto it = j.find(key);
    if (it == j.end()) return Bad(absl::StrCat("tensor \"", name, "\": no \"", key, "\""));
    return &*it;
  };
  if (!j.is_object()) return Bad(absl::StrCat("tensor \"", name, "\": not a JSON object"));
  auto dtype = field("dtype");
  if (!dtype.ok()) return dtype.status();
  if (!(*dtype)->is_string() || !v1::DType_Parse((*dtype)->get<std::string>(), &e.dtype) ||
      ElementSize(e.dtype) == 0) {
    return Bad(absl::StrCat("tensor \"", name, "\": dtype ", (*dtype)->dump(),
                            " is not one of F32, F64, F16, BF16, I32, I64"));
  }
  auto shape = field("shape");
  if (!shape.ok()) return shape.status();
  if (!(*shape)->is_array()) return Bad(absl::StrCat("tensor \"", name, "\": shape not a list"));
  for (const nlohmann::json& d : **shape) {
    if (!d.is_number_unsigned()) {
      return Bad(absl::StrCat("tensor \"", name, "\": shape ", (*shape)->dump(),
                              " holds something other than a non-negative integer"));
    }
    e.shape.add_dims(d.get<int64_t>());
  }
  auto offsets = field("data_offsets");
  if (!offsets.ok()) return offsets.status();
  if (!(*offsets)->is_array() || (*offsets)->size() != 2 || !(**offsets)[0].is_number_unsigned() ||
      !(**offsets)[1].is_number_unsigned()) {
    return Bad(absl::StrCat("tensor \"", name, "\": data_offsets ", (*offsets)->dump(),
                            " is not [begin, end]"));
  }
  e.begin = (**offsets)[0].get<uint64_t>();
  e.end = (**offsets)[1].get<uint64_t>();
  const int64_t n = NumElements(e.shape);
  if (n < 0 || e.end < e.begin ||
      e.end - e.begin != static_cast<uint64_t>(n) * ElementSize(e.dtype)) {
    return Bad(absl::StrCat("tensor \"", name, "\": data_offsets ", (*offsets)->dump(),
                            " do not span its shape ", (*shape)->dump(), " of ",
                            v1::DType_Name(e.dtype)));
  }
  return e;
}

}  // namespace

absl::StatusOr<std::string> EncodeSafetensors(const Weights& weights) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const v1::NamedTensor& t : weights.tensors) {
    if (absl::Status s = CheckTensor(t); !s.ok()) return s;
    if (t.name() == kMetadataKey || header.contains(t.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.name(), ": the name is taken (twice, or __metadata__)"));
    }
    nlohmann::json shape = nlohmann::json::array();
    for (int64_t d : t.tensor().shape().dims()) shape.push_back(d);
    const uint64_t size = t.tensor().content().size();
    header[t.name()] = {{"dtype", v1::DType_Name(t.tensor().dtype())},
                        {"shape", shape},
                        {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  if (!weights.metadata.empty()) header[kMetadataKey] = weights.metadata;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  PutU64(json.size(), &out);
  out += json;
  for (const v1::NamedTensor& t : weights.tensors) out += t.tensor().content();
  return out;
}

absl::StatusOr<Weights> DecodeSafetensors(absl::string_view bytes) {
  if (bytes.size() < 8) {
    return Bad(absl::StrCat(bytes.size(), " bytes, shorter than the 8-byte header length"));
  }
  const uint64_t n = GetU64(bytes);
  if (n > bytes.size() - 8) {
    return Bad(absl::StrCat("header length ", n, " runs past the end of the ", bytes.size(),
                            "-byte file (not a safetensors file?)"));
  }
  const absl::string_view text = bytes.substr(8, n);
  nlohmann::json header =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return Bad("the header is not a JSON object");
  }
  const absl::string_view buffer = bytes.substr(8 + n);
  Weights w;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object()) return Bad("__metadata__ is not a JSON object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return Bad(absl::StrCat("__metadata__.", m.key(), " is not a string"));
        }
        w.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    absl::StatusOr<Entry> e = ParseEntry(it.key(), it.value());
    if (!e.ok()) return e.status();
    entries.push_back(*std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t covered = 0;
  for (const Entry& e : entries) {
    if (e.begin != covered || e.end > buffer.size()) {
      return Bad(absl::StrCat("tensor \"", e.name, "\": data_offsets [", e.begin, ", ", e.end,
                              "] leave a gap, overlap another tensor or pass the end of the ",
                              buffer.size(), "-byte data buffer"));
    }
    covered = e.end;
    v1::NamedTensor t;
    t.set_name(e.name);
    t.mutable_tensor()->set_dtype(e.dtype);
    *t.mutable_tensor()->mutable_shape() = e.shape;
    t.mutable_tensor()->set_content(std::string(buffer.substr(e.begin, e.end - e.begin)));
    w.tensors.push_back(std::move(t));
  }
  if (covered != buffer.size()) {
    return Bad(absl::StrCat("the tensors cover ", covered, " of the ", buffer.size(),
                            " bytes of the data buffer"));
  }
  return w;
}

absl::StatusOr<Weights> ReadSafetensorsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  absl::StatusOr<Weights> w = DecodeSafetensors(ss.str());
  if (!w.ok())
    return absl::Status(w.status().code(), absl::StrCat(path, ": ", w.status().message()));
  return w;
}

absl::Status RegisterSafetensors(FormatRegistry& registry) {
  return registry.Register(
      {"safetensors", "the variables (and slots) with their shapes and the job in __metadata__",
       [](const ExportRequest& r) -> absl::StatusOr<std::string> {
         absl::StatusOr<Weights> w = WeightsFromCheckpoint(*r.checkpoint, r.options);
         if (!w.ok()) return w.status();
         return EncodeSafetensors(*w);
       }});
}

}  // namespace lockstep::exporting
