#include "jobspec/rules.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "engine/model_builder.h"
#include "engine/optimizer.h"

namespace lockstep {
namespace jobspec {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status ValidateTfRecordFeature(const v1::TfRecordFeature& feature, const std::string& field) {
  if (feature.name().empty()) {
    return Invalid(absl::StrCat(field, ".name"), "missing: the key of the feature in each Example");
  }
  for (int i = 0; i < feature.shape_size(); ++i) {
    if (feature.shape(i) <= 0) {
      return Invalid(absl::StrCat(field, ".shape[", i, "]"),
                     absl::StrCat(feature.shape(i), " must be > 0"));
    }
  }
  if (feature.dtype() != v1::TfRecordFeature::FLOAT &&
      feature.dtype() != v1::TfRecordFeature::INT64) {
    return Invalid(absl::StrCat(field, ".dtype"),
                   "missing: FLOAT (a float_list) or INT64 (an int64_list)");
  }
  return absl::OkStatus();
}

// Values per example of a feature: the product of its shape (1 for no shape).
int64_t ValuesOf(const v1::TfRecordFeature& feature) {
  int64_t n = 1;
  for (int64_t d : feature.shape()) n *= d;
  return n;
}

// The features and label of TFRECORD data (data/example_reader.h reads them): named, with
// positive shapes and a dtype, the label the values the model's labels take, the features' values
// filling model.input_shape.
absl::Status ValidateTfRecordSpec(const v1::DataSource& source, absl::string_view field,
                                  const v1::ModelSpec& model) {
  const std::string spec_field = absl::StrCat(field, ".tfrecord");
  if (!source.has_tfrecord()) {
    return Invalid(spec_field,
                   "missing: TFRECORD data names its input features and its label, e.g. "
                   "{\"features\": [{\"name\": \"pixels\", \"shape\": [64], \"dtype\": "
                   "\"FLOAT\"}], \"label\": {\"name\": \"label\", \"dtype\": \"INT64\"}}");
  }
  const v1::TfRecordSpec& spec = source.tfrecord();
  if (spec.features().empty()) {
    return Invalid(absl::StrCat(spec_field, ".features"), "at least one input feature is needed");
  }
  int64_t values = 0;
  for (int i = 0; i < spec.features_size(); ++i) {
    const std::string f = absl::StrCat(spec_field, ".features[", i, "]");
    LS_RETURN_IF_ERROR(ValidateTfRecordFeature(spec.features(i), f));
    for (int j = 0; j < i; ++j) {
      if (spec.features(j).name() == spec.features(i).name()) {
        return Invalid(absl::StrCat(f, ".name"),
                       absl::StrCat("'", spec.features(i).name(), "' is also features[", j, "]"));
      }
    }
    values += ValuesOf(spec.features(i));
  }
  const std::string label = absl::StrCat(spec_field, ".label");
  if (!spec.has_label()) return Invalid(label, "missing: the feature that holds the label");
  LS_RETURN_IF_ERROR(ValidateTfRecordFeature(spec.label(), label));
  // The label holds the values per example the model's "labels" input takes: one class id or
  // target, or one per position of a sequence model's output ([t] for logits [batch, t, c]).
  if (absl::StatusOr<engine::Graph> g = engine::BuildModel(model); g.ok()) {
    const engine::Shape labels = g->shape(g->FindInput("labels"));
    int64_t wanted = 1;
    for (int i = 1; i < labels.rank(); ++i) wanted *= labels.dim(i);
    if (ValuesOf(spec.label()) != wanted) {
      return Invalid(
          absl::StrCat(label, ".shape"),
          absl::StrCat("the label holds ", ValuesOf(spec.label()),
                       " values per example, but the model takes labels ", labels.ToString(), " (",
                       wanted, " per example; one value: leave shape empty or [1])"));
    }
  }
  // The model's input (checked by the model builder before this) holds every value.
  int64_t inputs = 1;
  for (int64_t d : model.input_shape()) inputs *= d;
  if (values != inputs) {
    return Invalid(
        absl::StrCat(spec_field, ".features"),
        absl::StrCat("the features hold ", values, " values per example, but model.input_shape [",
                     absl::StrJoin(model.input_shape(), ","), "] takes ", inputs));
  }
  return absl::OkStatus();
}

// model.precision (graph.proto's Precision): a known mode, and an explicit one only for f32
// models (BF16_MIXED and TF32 round f32 operands; F32 contradicts f64).
absl::Status ValidatePrecision(const v1::ModelSpec& model) {
  const v1::Precision::Mode p = model.precision();
  if (!v1::Precision::Mode_IsValid(p)) {
    return Invalid(
        "model.precision",
        absl::StrCat(static_cast<int>(p), " is not a precision; use F32, TF32 or BF16_MIXED"));
  }
  if (p != v1::Precision::PRECISION_UNSPECIFIED && model.f64()) {
    return Invalid("model.precision", absl::StrCat(v1::Precision::Mode_Name(p),
                                                   " is for f32 models, but model.f64 is true; "
                                                   "drop one of them"));
  }
  return absl::OkStatus();
}

// A path as text: not empty, no NUL byte, no ".." component (the worker resolves it under
// its roots, worker/file_roots.h).
absl::Status CheckPathText(const std::string& path, const std::string& field) {
  if (path.empty()) return Invalid(field, "empty path");
  if (path.find('\0') != std::string::npos) return Invalid(field, "the path holds a NUL byte");
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") {
      return Invalid(field, absl::StrCat("'", path,
                                         "' has a '..' component; give a path inside the "
                                         "workers' roots (lockstepd --data_root, --output_root)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSource(const v1::DataSource& source, absl::string_view field,
                            const v1::ModelSpec& model) {
  if (source.format() == v1::DataSource::RECORDS) {
    // The worker's input (worker/job_input.cc) reads CSV and TFRECORD files and generates
    // SYNTHETIC data only.
    return Invalid(absl::StrCat(field, ".format"),
                   "RECORDS is not supported by the job executor yet; use CSV or TFRECORD");
  }
  if (!v1::DataSource::Format_IsValid(source.format())) {
    return Invalid(absl::StrCat(field, ".format"),
                   absl::StrCat("unknown format ", source.format()));
  }
  if (source.format() == v1::DataSource::TFRECORD) {
    LS_RETURN_IF_ERROR(ValidateTfRecordSpec(source, field, model));
  } else if (source.has_tfrecord()) {
    return Invalid(absl::StrCat(field, ".tfrecord"), "only for format TFRECORD");
  }
  if (source.format() == v1::DataSource::SYNTHETIC) {
    if (source.synthetic_examples() <= 0) {
      return Invalid(absl::StrCat(field, ".synthetic_examples"),
                     absl::StrCat(source.synthetic_examples(), " must be > 0 for SYNTHETIC data"));
    }
    return absl::OkStatus();
  }
  if (source.files().empty()) {
    return Invalid(absl::StrCat(field, ".files"), "at least one file is needed");
  }
  for (int i = 0; i < source.files_size(); ++i) {
    LS_RETURN_IF_ERROR(CheckPathText(source.files(i), absl::StrCat(field, ".files[", i, "]")));
  }
  if (source.feature_scale() < 0) {
    return Invalid(absl::StrCat(field, ".feature_scale"),
                   absl::StrCat(source.feature_scale(), " must be >= 0"));
  }
  return absl::OkStatus();
}

// The worker builds its optimizer with engine::Optimizer::Create (through
// distribute::Trainer); the same checks run here, so a bad optimizer is refused at submit.
// Create names every error under "optimizer." (kind, parameters, learning_rate). No
// variables: the checks do not depend on them, and slots for a large model would be
// allocated for nothing.
absl::Status ValidateOptimizer(const v1::OptimizerSpec& spec) {
  return engine::Optimizer::Create(spec, {}).status();
}

// The worker knows the size of an epoch only when it holds the training set in memory:
// SYNTHETIC data (synthetic_examples per epoch), or CSV or TFRECORD files read whole to hold out
// data.eval_fraction of them (no data.eval source). Otherwise it streams the files and
// cannot turn epochs into steps (worker/job_input.h, JobInput::train_examples).
absl::Status CheckEpochsKnowable(const v1::JobSpec& spec) {
  if (spec.epochs() <= 0) return absl::OkStatus();
  const v1::DataSpec& data = spec.data();
  if (data.train().format() == v1::DataSource::SYNTHETIC) {
    const int64_t per_step =
        spec.global_batch_size() * std::max(1, spec.optimizer().gradient_accumulation_steps());
    if (data.train().synthetic_examples() < per_step) {
      return Invalid("epochs",
                     absl::StrCat("data.train has ", data.train().synthetic_examples(),
                                  " synthetic examples, fewer than one step's batch (", per_step,
                                  "); raise data.train.synthetic_examples or give "
                                  "steps instead"));
    }
    return absl::OkStatus();
  }
  if (data.has_eval()) {
    return Invalid("epochs",
                   "with a data.eval source the training files are streamed and the size of an "
                   "epoch is unknown; give steps instead (or drop data.eval and hold out "
                   "data.eval_fraction of data.train, which reads it into memory)");
  }
  if (data.eval_fraction() <= 0) {
    return Invalid("epochs",
                   "with data.eval_fraction 0 the training files are streamed and the size of an "
                   "epoch is unknown; give steps instead (or set data.eval_fraction > 0, which "
                   "reads data.train into memory)");
  }
  return absl::OkStatus();
}

}  // namespace

v1::StrategyKind EffectiveStrategy(const v1::JobSpec& spec) {
  return spec.strategy() == v1::STRATEGY_KIND_UNSPECIFIED ? v1::MULTI_WORKER_MIRRORED
                                                          : spec.strategy();
}

int WorkersNeeded(const v1::JobSpec& spec) {
  if (spec.num_workers() > 0) return spec.num_workers();
  return EffectiveStrategy(spec) == v1::MULTI_WORKER_MIRRORED ? 0 : 1;
}

absl::Status CheckSpecRules(const v1::JobSpec& spec) {
  const v1::StrategyKind strategy = EffectiveStrategy(spec);
  if (!v1::StrategyKind_IsValid(strategy)) {
    return Invalid("strategy", absl::StrCat("unknown strategy ", spec.strategy()));
  }
  if (spec.num_workers() < 0) {
    return Invalid("num_workers", absl::StrCat(spec.num_workers(), " must be >= 0"));
  }
  if (strategy != v1::MULTI_WORKER_MIRRORED && spec.num_workers() > 1) {
    return Invalid("num_workers", absl::StrCat(spec.num_workers(), " workers, but ",
                                               v1::StrategyKind_Name(strategy),
                                               " runs on one worker; use MULTI_WORKER_MIRRORED"));
  }
  if (!spec.has_model()) return Invalid("model", "missing");
  LS_RETURN_IF_ERROR(ValidatePrecision(spec.model()));
  if (absl::StatusOr<engine::Graph> g = engine::BuildModel(spec.model()); !g.ok()) {
    // The builder names the field inside the model ("layers[2].dense.units: ...").
    return absl::InvalidArgumentError(absl::StrCat("model.", g.status().message()));
  }
  if (!spec.model().inputs().empty()) {  // the data pipeline feeds "features" and "labels"
    return Invalid("model.inputs", "a job's data feeds one input; give model.input_shape");
  }
  if (!spec.has_optimizer()) return Invalid("optimizer", "missing");
  LS_RETURN_IF_ERROR(ValidateOptimizer(spec.optimizer()));
  if (!spec.has_data() || !spec.data().has_train()) return Invalid("data.train", "missing");
  LS_RETURN_IF_ERROR(ValidateSource(spec.data().train(), "data.train", spec.model()));
  if (spec.data().has_eval()) {
    LS_RETURN_IF_ERROR(ValidateSource(spec.data().eval(), "data.eval", spec.model()));
    if (spec.data().eval().format() == v1::DataSource::SYNTHETIC) {
      // The worker evaluates on files only; it would silently skip this source.
      return Invalid("data.eval.format",
                     "SYNTHETIC evaluation data is not supported; give CSV or TFRECORD files, or "
                     "data.eval_fraction to hold out part of data.train");
    }
  }
  if (spec.data().eval_fraction() < 0 || spec.data().eval_fraction() >= 1) {
    return Invalid("data.eval_fraction",
                   absl::StrCat(spec.data().eval_fraction(), " must be in [0, 1)"));
  }
  if (spec.evaluator().enabled() && !spec.data().has_eval() && spec.data().eval_fraction() <= 0) {
    return Invalid("evaluator.enabled",
                   "the evaluator needs eval data: give data.eval or data.eval_fraction > 0");
  }
  if (spec.global_batch_size() <= 0) {
    return Invalid("global_batch_size", absl::StrCat(spec.global_batch_size(), " must be > 0"));
  }
  if (spec.steps() < 0 || spec.epochs() < 0 || (spec.steps() > 0) == (spec.epochs() > 0)) {
    return Invalid("steps, epochs", absl::StrCat("exactly one must be positive (got steps=",
                                                 spec.steps(), ", epochs=", spec.epochs(), ")"));
  }
  LS_RETURN_IF_ERROR(CheckEpochsKnowable(spec));
  if (spec.eval_every_steps() < 0) {
    return Invalid("eval_every_steps", absl::StrCat(spec.eval_every_steps(), " must be >= 0"));
  }
  const v1::CheckpointSpec& ckpt = spec.checkpoint();
  if (ckpt.every_steps() < 0) {
    return Invalid("checkpoint.every_steps", absl::StrCat(ckpt.every_steps(), " must be >= 0"));
  }
  if (ckpt.keep() < 0)
    return Invalid("checkpoint.keep", absl::StrCat(ckpt.keep(), " must be >= 0"));
  if (!ckpt.dir().empty()) LS_RETURN_IF_ERROR(CheckPathText(ckpt.dir(), "checkpoint.dir"));
  if (!spec.summaries().dir().empty()) {
    LS_RETURN_IF_ERROR(CheckPathText(spec.summaries().dir(), "summaries.dir"));
  }
  if (spec.summaries().every_steps() < 0) {
    return Invalid("summaries.every_steps",
                   absl::StrCat(spec.summaries().every_steps(), " must be >= 0"));
  }
  if (spec.has_init_from()) {
    LS_RETURN_IF_ERROR(CheckPathText(spec.init_from().path(), "init_from.path"));
    if (spec.init_from().format() != v1::InitFrom::SAFETENSORS) {
      return Invalid("init_from.format",
                     "missing or unknown: SAFETENSORS (what `lockstep export "
                     "--format=safetensors` writes) is the one format a job starts from");
    }
  }
  const v1::CommunicationSpec& comm = spec.communication();
  // communication.implementation against the replicas' kind and the workers: lower.cc.
  if (comm.bytes_per_pack() < 0) {
    return Invalid("communication.bytes_per_pack",
                   absl::StrCat(comm.bytes_per_pack(), " must be >= 0"));
  }
  if (comm.timeout_ms() < 0) {
    return Invalid("communication.timeout_ms", absl::StrCat(comm.timeout_ms(), " must be >= 0"));
  }
  if (comm.encrypt() && EffectiveStrategy(spec) != v1::MULTI_WORKER_MIRRORED) {
    return Invalid("communication.encrypt",
                   absl::StrCat("encrypts the TCP traffic between workers, but ",
                                v1::StrategyKind_Name(spec.strategy()),
                                " runs on one worker; use MULTI_WORKER_MIRRORED or leave it off"));
  }
  if (!v1::CommunicationSpec::Compression_IsValid(comm.compression())) {
    return Invalid("communication.compression",
                   absl::StrCat(static_cast<int>(comm.compression()),
                                " is not a compression; use NONE or BF16"));
  }
  if (comm.compression() == v1::CommunicationSpec::BF16 &&
      EffectiveStrategy(spec) != v1::MULTI_WORKER_MIRRORED) {
    return Invalid("communication.compression",
                   absl::StrCat("BF16 halves the gradients that workers exchange, but ",
                                v1::StrategyKind_Name(spec.strategy()),
                                " runs on one worker; use MULTI_WORKER_MIRRORED or NONE"));
  }
  if (spec.restart_policy().max_restarts() < 0) {
    return Invalid("restart_policy.max_restarts",
                   absl::StrCat(spec.restart_policy().max_restarts(), " must be >= 0"));
  }
  if (ckpt.copies() < 0) {
    return Invalid("checkpoint.copies",
                   absl::StrCat(ckpt.copies(), " must be >= 0 (0: every worker keeps a copy)"));
  }
  const v1::RestartPolicy& restart = spec.restart_policy();
  if (restart.min_workers() < 0) {
    return Invalid("restart_policy.min_workers",
                   absl::StrCat(restart.min_workers(), " must be >= 0"));
  }
  if (restart.max_workers() < 0) {
    return Invalid("restart_policy.max_workers",
                   absl::StrCat(restart.max_workers(), " must be >= 0"));
  }
  if (restart.replacement_timeout_ms() < 0) {
    return Invalid("restart_policy.replacement_timeout_ms",
                   absl::StrCat(restart.replacement_timeout_ms(), " must be >= 0"));
  }
  if (restart.max_workers() > 0 && restart.min_workers() > restart.max_workers()) {
    return Invalid("restart_policy.min_workers",
                   absl::StrCat(restart.min_workers(), " is above restart_policy.max_workers ",
                                restart.max_workers()));
  }
  if (restart.min_workers() > 0) {
    if (strategy != v1::MULTI_WORKER_MIRRORED) {
      return Invalid("restart_policy.min_workers",
                     absl::StrCat("elastic worker counts need MULTI_WORKER_MIRRORED, not ",
                                  v1::StrategyKind_Name(strategy)));
    }
    if (restart.max_restarts() == 0) {
      return Invalid("restart_policy.min_workers",
                     absl::StrCat(restart.min_workers(),
                                  ", but restart_policy.max_restarts is 0: losing a worker is a "
                                  "restart; set max_restarts"));
    }
    if (spec.num_workers() > 0 && restart.min_workers() > spec.num_workers()) {
      return Invalid(
          "restart_policy.min_workers",
          absl::StrCat(restart.min_workers(), " is above num_workers ", spec.num_workers()));
    }
  }
  if (spec.restart_policy().max_restarts() > 0 && ckpt.every_steps() == 0) {
    return Invalid("checkpoint.every_steps",
                   absl::StrCat("0 (checkpoints only at the end), but restart_policy.max_restarts "
                                "is ",
                                spec.restart_policy().max_restarts(),
                                ": every restart would redo all the steps done before the "
                                "failure; set checkpoint.every_steps (e.g. 100) so that a "
                                "restart loses at most that many steps"));
  }
  return absl::OkStatus();
}

namespace {

// a * b, or INT64_MAX when it would not fit (sizes from a client may be anything).
int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

// Elements of a shape, an unknown (batch) dimension counted as 1.
int64_t ElementsPerExample(const engine::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dims()) n = SaturatingMul(n, d < 0 ? 1 : d);
  return n;
}

absl::Status TooLarge(absl::string_view field, absl::string_view what, int64_t figure,
                      int64_t limit, absl::string_view flag) {
  return absl::ResourceExhaustedError(absl::StrCat(field, ": ", what, " ", figure,
                                                   ", over this coordinator's limit of ", limit,
                                                   " (coordinator flag --", flag, ")"));
}

}  // namespace

absl::Status CheckModelSize(const v1::JobSpec& spec, const JobLimits& limits,
                            int64_t num_replicas) {
  LS_ASSIGN_OR_RETURN(engine::Graph graph, engine::BuildModel(spec.model()));
  int64_t parameters = 0;
  int64_t variable_bytes = 0;
  for (const engine::VariableInfo& v : graph.Variables()) {
    const int64_t n = ElementsPerExample(v.shape);
    parameters = SaturatingAdd(parameters, n);
    variable_bytes = SaturatingAdd(variable_bytes, SaturatingMul(n, DTypeSize(v.dtype)));
  }
  if (parameters > limits.max_model_parameters) {
    return TooLarge("model", "parameters", parameters, limits.max_model_parameters,
                    "max_model_parameters");
  }
  // Each replica holds the variables, their gradients and the optimizer's slots.
  const int slots = spec.optimizer().has_adam() ? 2 : spec.optimizer().has_momentum() ? 1 : 0;
  const int64_t model_bytes = SaturatingMul(variable_bytes, 2 + slots);
  if (model_bytes > limits.max_model_bytes) {
    return TooLarge("model", "bytes per replica (variables, gradients, optimizer slots)",
                    model_bytes, limits.max_model_bytes, "max_model_bytes");
  }
  // What one example flows through: every node's output, forward and backward.
  int64_t per_example = 0;
  for (int i = 0; i < graph.num_nodes(); ++i) {
    if (graph.node(i).op() == v1::VARIABLE) continue;
    per_example = SaturatingAdd(
        per_example, SaturatingMul(ElementsPerExample(graph.shape(i)), DTypeSize(graph.dtype(i))));
  }
  const int64_t replicas = std::max<int64_t>(1, num_replicas);
  const int64_t per_replica = (spec.global_batch_size() + replicas - 1) / replicas;
  const int64_t batch_bytes = SaturatingMul(SaturatingMul(per_example, per_replica), 2);
  if (batch_bytes > limits.max_batch_bytes) {
    return TooLarge("global_batch_size",
                    absl::StrCat(spec.global_batch_size(), " over ", replicas,
                                 " replica(s) makes each hold bytes of activations"),
                    batch_bytes, limits.max_batch_bytes, "max_batch_bytes");
  }
  return absl::OkStatus();
}

absl::Status CheckBatchDivisible(const v1::JobSpec& spec, int64_t num_replicas) {
  if (num_replicas <= 0 || spec.global_batch_size() % num_replicas == 0) return absl::OkStatus();
  return Invalid("global_batch_size",
                 absl::StrCat(spec.global_batch_size(), " is not divisible by the ", num_replicas,
                              " replicas in sync (one per device of every training worker); "
                              "use a multiple of ",
                              num_replicas));
}

}  // namespace jobspec
}  // namespace lockstep
