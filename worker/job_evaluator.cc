#include "worker/job_evaluator.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "common/status.h"
#include "engine/executor.h"
#include "engine/model_builder.h"
#include "spdlog/spdlog.h"
#include "worker/chief/event_writer.h"
#include "worker/job_input.h"

namespace lockstep {
namespace worker {
namespace {

// The model's variables, in the graph's order, from a checkpoint.
absl::StatusOr<std::vector<engine::Tensor>> VariablesOf(const engine::Graph& graph,
                                                        const v1::Checkpoint& checkpoint) {
  absl::flat_hash_map<std::string, const v1::NamedTensor*> by_name;
  for (const v1::NamedTensor& v : checkpoint.variables()) by_name[v.name()] = &v;
  std::vector<engine::Tensor> vars;
  for (const engine::VariableInfo& info : graph.Variables()) {
    auto it = by_name.find(info.name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("the checkpoint of step ",
                                                     checkpoint.global_step(),
                                                     " has no variable \"", info.name, "\""));
    }
    LS_ASSIGN_OR_RETURN(engine::Tensor t, engine::Tensor::FromProto(it->second->tensor()));
    if (t.dtype() != info.dtype || t.shape() != info.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("the checkpoint's variable \"", info.name, "\" is ", t.DebugString()));
    }
    vars.push_back(std::move(t));
  }
  return vars;
}

}  // namespace

absl::Status RunEvaluator(const v1::Partition& partition, collectives::Store* store,
                          const EvalLinkOptions& link_options, Clock* clock,
                          const EvaluatorHooks& hooks) {
  const v1::JobSpec& spec = partition.spec();
  LS_ASSIGN_OR_RETURN(JobInput input, BuildJobInput(spec, partition.plan().input()));
  if (!input.eval.has_value()) {  // the lowering refuses an evaluator without eval data
    return absl::FailedPreconditionError(absl::StrCat(
        "partition.plan.input of job ", partition.job_id(),
        ": no evaluation data for the evaluator task (a plan the coordinator cannot have made)"));
  }
  LS_ASSIGN_OR_RETURN(engine::Graph graph, engine::BuildModel(spec.model()));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<engine::Executor> executor, engine::Executor::Create(&graph));
  std::unique_ptr<chief::EventWriter> events;
  if (!spec.summaries().dir().empty()) {
    chief::EventWriter::Options eo;
    eo.dir = absl::StrCat(spec.summaries().dir(), "/eval");
    eo.filename_suffix = absl::StrCat(".", partition.job_id(), ".", partition.attempt(), ".eval");
    eo.clock = clock;
    LS_ASSIGN_OR_RETURN(events, chief::EventWriter::Create(eo));
    hooks.update_report([&](v1::JobReport& r) { r.set_summary_dir(eo.dir); });
  }
  LS_ASSIGN_OR_RETURN(std::unique_ptr<EvalLink> link,
                      EvalLink::Connect(partition, store, link_options));
  LS_RETURN_IF_ERROR(hooks.publish(link.get()));
  struct Unpublish {
    const EvaluatorHooks& hooks;
    ~Unpublish() { hooks.publish(nullptr).IgnoreError(); }
  } unpublish{hooks};
  int evaluated = 0;
  while (true) {
    // No deadline of its own: the chief's next checkpoint may be far away. The wait ends
    // with the chief (its connection closes), or with an abort of the attempt.
    LS_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                        link->Receive(clock->Now() + absl::Hours(24 * 365)));
    if (!bytes.has_value()) break;
    LS_ASSIGN_OR_RETURN(v1::Checkpoint checkpoint, checkpoint::CheckpointManager::Decode(*bytes));
    if (checkpoint.job_uid() != partition.job_uid()) {
      return absl::DataLossError(absl::StrCat("the chief sent a checkpoint of job ",
                                              checkpoint.job_uid(), ", not of ",
                                              partition.job_uid()));
    }
    LS_ASSIGN_OR_RETURN(std::vector<engine::Tensor> vars, VariablesOf(graph, checkpoint));
    LS_ASSIGN_OR_RETURN(engine::StepResult result,
                        executor->Evaluate(vars, {{"features", input.eval->features},
                                                  {"labels", input.eval->labels}}));
    const int64_t step = checkpoint.global_step();
    if (events != nullptr) {
      LS_RETURN_IF_ERROR(events->AddScalars(
          step, {{std::string(chief::summary_tags::kEvalAccuracy), result.accuracy},
                 {std::string(chief::summary_tags::kEvalLoss), result.loss}}));
    }
    ++evaluated;
    spdlog::info("job {} attempt {}: evaluator: step {}: eval loss {:.4f}, accuracy {:.4f}",
                 partition.job_id(), partition.attempt(), step, result.loss, result.accuracy);
    hooks.update_report([&](v1::JobReport& r) {
      r.set_step(step);
      r.set_loss(result.loss);
      r.set_eval_accuracy(result.accuracy);
      r.set_checkpoints_evaluated(evaluated);
    });
  }
  if (events != nullptr) LS_RETURN_IF_ERROR(events->Flush());
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace lockstep
