#include "data/example_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::data {
namespace {

const char* KindName(ExampleFeature::Kind kind) {
  return kind == ExampleFeature::Kind::kInt64 ? "int64_list (dtype INT64)"
                                              : "float_list (dtype FLOAT)";
}

const char* ListName(v1::Feature::KindCase kind) {
  switch (kind) {
    case v1::Feature::kBytesList:
      return "a bytes_list";
    case v1::Feature::kFloatList:
      return "a float_list";
    case v1::Feature::kInt64List:
      return "an int64_list";
    default:
      return "no list";
  }
}

int64_t ValuesOf(const ExampleFeature& f) { return f.shape.num_elements(); }

}  // namespace

ExampleReader::ExampleReader(std::vector<std::string> files, ExampleOptions options)
    : files_(std::move(files)),
      options_(std::move(options)),
      feature_shape_(FeatureShape(options_)),
      error_(Validate(options_)) {}

absl::Status ExampleReader::Validate(const ExampleOptions& o) {
  if (o.features.empty()) {
    return absl::InvalidArgumentError("TFRecord examples: no input features named");
  }
  auto check = [](const ExampleFeature& f, absl::string_view what) -> absl::Status {
    if (f.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("TFRecord examples: ", what, ": no name"));
    }
    for (int64_t d : f.shape.dims()) {
      if (d < 1) {
        return absl::InvalidArgumentError(absl::StrCat("TFRecord examples: ", what, " '", f.name,
                                                       "': shape ", f.shape.ToString(),
                                                       " has a dimension < 1"));
      }
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < o.features.size(); ++i) {
    if (absl::Status s = check(o.features[i], absl::StrCat("features[", i, "]")); !s.ok()) return s;
  }
  return check(o.label, "label");
}

engine::Shape ExampleReader::FeatureShape(const ExampleOptions& o) {
  if (o.features.size() == 1) {
    return o.features[0].shape.rank() == 0 ? engine::Shape{1} : o.features[0].shape;
  }
  int64_t total = 0;
  for (const ExampleFeature& f : o.features) total += ValuesOf(f);
  return engine::Shape{total};
}

absl::StatusOr<bool> ExampleReader::NextRecord(std::string* record) {
  while (file_index_ < files_.size()) {
    if (!reader_.has_value()) {
      absl::StatusOr<TfRecordReader> opened = TfRecordReader::Open(files_[file_index_]);
      if (!opened.ok()) return opened.status();
      reader_.emplace(std::move(*opened));
      record_index_ = -1;
    }
    const uint64_t offset = reader_->offset();
    absl::StatusOr<std::string> next = reader_->Next();
    if (next.ok()) {
      ++record_index_;
      record_offset_ = offset;
      *record = std::move(*next);
      return true;
    }
    if (!absl::IsOutOfRange(next.status())) return next.status();
    reader_.reset();
    ++file_index_;
  }
  return false;
}

absl::Status ExampleReader::Parse(const std::string& record, Element* out) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(files_[file_index_], ": record ", record_index_,
                                                   " (offset ", record_offset_, "): ", what));
  };
  if (!example_.ParseFromString(record)) return bad("not a tf.train.Example (unparsable)");
  const auto& map = example_.features().feature();
  // The values of `f`, checked against its kind and length; exactly one of the lists is set.
  auto values = [&](const ExampleFeature& f, const v1::FloatList** floats,
                    const v1::Int64List** ints) -> absl::Status {
    auto it = map.find(f.name);
    if (it == map.end()) return bad(absl::StrCat("no feature '", f.name, "'"));
    const v1::Feature& feature = it->second;
    const bool want_int = f.kind == ExampleFeature::Kind::kInt64;
    if ((want_int && !feature.has_int64_list()) || (!want_int && !feature.has_float_list())) {
      return bad(absl::StrCat("feature '", f.name, "' holds ", ListName(feature.kind_case()),
                              ", expected a ", KindName(f.kind)));
    }
    const int64_t n =
        want_int ? feature.int64_list().value_size() : feature.float_list().value_size();
    if (n != ValuesOf(f)) {
      return bad(absl::StrCat("feature '", f.name, "' has ", n, " values, expected ", ValuesOf(f),
                              " (shape ", f.shape.ToString(), ")"));
    }
    *floats = want_int ? nullptr : &feature.float_list();
    *ints = want_int ? &feature.int64_list() : nullptr;
    return absl::OkStatus();
  };
  engine::Tensor features(DType::kF32, feature_shape_);
  float* dst = features.data<float>();
  for (const ExampleFeature& f : options_.features) {
    const v1::FloatList* floats = nullptr;
    const v1::Int64List* ints = nullptr;
    if (absl::Status s = values(f, &floats, &ints); !s.ok()) return s;
    if (floats != nullptr) {
      for (float v : floats->value()) *dst++ = v;
    } else {
      for (int64_t v : ints->value()) *dst++ = static_cast<float>(v);
    }
  }
  const v1::FloatList* floats = nullptr;
  const v1::Int64List* ints = nullptr;
  if (absl::Status s = values(options_.label, &floats, &ints); !s.ok()) return s;
  if (ValuesOf(options_.label) == 1) {
    out->labels = floats != nullptr ? engine::Tensor::Scalar<float>(floats->value(0))
                                    : engine::Tensor::Scalar<int64_t>(ints->value(0));
  } else if (floats != nullptr) {
    out->labels = engine::Tensor::FromVector<float>(
        std::vector<float>(floats->value().begin(), floats->value().end()), options_.label.shape);
  } else {
    out->labels = engine::Tensor::FromVector<int64_t>(
        std::vector<int64_t>(ints->value().begin(), ints->value().end()), options_.label.shape);
  }
  out->features = std::move(features);
  return absl::OkStatus();
}

absl::StatusOr<bool> ExampleReader::Next(Element* out) {
  if (!error_.ok()) return error_;
  std::string record;
  absl::StatusOr<bool> more = NextRecord(&record);
  if (!more.ok()) {
    error_ = more.status();
    return error_;
  }
  if (!*more) return false;
  if (error_ = Parse(record, out); !error_.ok()) return error_;
  return true;
}

absl::StatusOr<int64_t> ExampleReader::Skip(int64_t n) {
  if (!error_.ok()) return error_;
  std::string record;
  for (int64_t i = 0; i < n; ++i) {
    absl::StatusOr<bool> more = NextRecord(&record);
    if (!more.ok()) {
      error_ = more.status();
      return error_;
    }
    if (!*more) return i;
  }
  return n;
}

}  // namespace lockstep::data
