#include "client/job_format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(JobFormatTest, BundledJobParses) {
  auto spec = ReadJobSpecFile("examples/jobs/digits_mlp.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->strategy(), v1::MULTI_WORKER_MIRRORED);
  EXPECT_EQ(spec->model().layers_size(), 3);
  EXPECT_EQ(spec->data().train().files(0), "examples/data/digits.csv.gz");
}

TEST(JobFormatTest, BadJsonIsRefusedNamingTheSource) {
  auto malformed = ParseJobSpecJson("{\"name\": ", "job.json");
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.status().message(), HasSubstr("job.json"));
  auto unknown = ParseJobSpecJson(R"({"model": {"layers": [{"conv9d": {}}]}})", "job.json");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("model.layers[0]"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("conv9d"));
  EXPECT_EQ(ReadJobSpecFile("/no/such/job.json").status().code(), absl::StatusCode::kNotFound);
}

TEST(JobFormatTest, TableAndResult) {
  v1::JobRecord j;
  j.set_id("job-000001");
  j.set_name("digits-mlp");
  j.set_state(v1::SUCCEEDED);
  j.set_attempt(1);
  j.mutable_progress()->set_step(900);
  j.mutable_progress()->set_total_steps(900);
  j.mutable_progress()->set_loss(0.05);
  j.mutable_progress()->set_eval_accuracy(0.97);
  j.mutable_progress()->set_unix_micros(1);
  j.mutable_progress()->set_checkpoint_path("/tmp/c/ckpt-900");
  j.mutable_progress()->set_step_ms(16.25);
  j.mutable_progress()->set_compute_ms(14.5);
  j.mutable_progress()->set_allreduce_wait_ms(1);
  j.mutable_progress()->set_apply_ms(0.75);
  const std::string table = FormatJobsTable({j}, absl::Now());
  EXPECT_THAT(table, HasSubstr("job-000001"));
  EXPECT_THAT(table, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(table, HasSubstr("900/900"));
  EXPECT_THAT(table, HasSubstr("1 job\n"));
  EXPECT_THAT(FormatJobResult(j), HasSubstr("test accuracy 0.9700"));
  EXPECT_THAT(FormatJobResult(j), HasSubstr("checkpoint: /tmp/c/ckpt-900"));
  EXPECT_THAT(FormatJobResult(j),
              HasSubstr("step 16.25 ms: compute 14.50, all-reduce wait 1.00, apply 0.75"));
  EXPECT_THAT(FormatProgressBar(j.progress(), 65, 10), HasSubstr("[##########] 900/900"));
  EXPECT_THAT(FormatProgressBar(j.progress(), 65, 10), HasSubstr("ETA 1:05"));
}

TEST(JobFormatTest, DescriptionShowsWhereEachWorkersStepsGo) {
  v1::GetJobResponse r;
  r.mutable_job()->set_id("job-000002");
  r.mutable_job()->set_state(v1::RUNNING);
  for (double wait : {1.25, 0.5}) {
    v1::JobReport* w = r.add_workers();
    w->set_phase(v1::JobReport::TRAINING);
    w->set_step(40);
    w->set_step_ms(15.5);
    w->set_compute_ms(15.5 - wait - 0.5);
    w->set_allreduce_wait_ms(wait);
    w->set_apply_ms(0.5);
  }
  const std::string text = FormatJobDescription(r);
  EXPECT_THAT(text, HasSubstr("STEP_MS  COMPUTE  AR_WAIT    APPLY"));
  EXPECT_THAT(text, HasSubstr("   15.50    13.75     1.25     0.50"));
  EXPECT_THAT(text, HasSubstr("   15.50    14.50     0.50     0.50"));
}

// A GPU job's description names its largest peak and largest reservation of device memory
// and where each is (every worker's report; the chief's progress without reports); a CPU
// job's says nothing of GPUs.
TEST(JobFormatTest, DescribeShowsTheGpuMemoryPeak) {
  v1::GetJobResponse r;
  r.mutable_job()->set_id("job-000004");
  r.mutable_job()->set_state(v1::RUNNING);
  r.add_workers();
  EXPECT_THAT(FormatJobDescription(r), Not(HasSubstr("GPU memory")));
  auto gpu = [](v1::JobReport* w, const char* device, uint64_t peak, uint64_t reserved) {
    v1::DeviceMemory* m = w->add_device_memory();
    m->set_device(device);
    m->set_peak_bytes(peak);
    m->set_reserved_bytes(reserved);
  };
  v1::JobProgress* chief = r.mutable_job()->mutable_progress();
  chief->add_device_memory()->set_device("/gpu:0");
  chief->mutable_device_memory(0)->set_peak_bytes(uint64_t{300} << 20);
  chief->mutable_device_memory(0)->set_reserved_bytes(uint64_t{512} << 20);
  r.clear_workers();
  EXPECT_THAT(FormatJobDescription(r),
              HasSubstr("GPU memory: peak 300.0 MiB (rank 0 /gpu:0), reserved 512.0 MiB (rank 0 "
                        "/gpu:0)\n"));
  gpu(r.add_workers(), "/gpu:0", uint64_t{1700} << 20, uint64_t{1800} << 20);
  v1::JobReport* w1 = r.add_workers();
  gpu(w1, "/gpu:0", uint64_t{1600} << 20, uint64_t{2} << 30);
  gpu(w1, "/gpu:1", 100, 4096);
  const std::string text = FormatJobDescription(r);
  EXPECT_THAT(text, HasSubstr("GPU memory: peak 1.7 GiB (rank 0 /gpu:0), reserved 2.0 GiB (rank 1 "
                              "/gpu:0)\n"));
}

// describe shows what the spec was lowered to, in a few lines: the strategy and workers, the
// replicas, the backend (saying when AUTO chose it), packs and timeout, checkpoints, the
// evaluation input and the restart policy as the plan filled it.
TEST(JobFormatTest, DescribeShowsThePlansDecisions) {
  v1::GetJobResponse r;
  r.mutable_job()->set_id("job-000005");
  r.mutable_job()->set_state(v1::PENDING);
  r.mutable_spec()->set_global_batch_size(64);
  EXPECT_THAT(FormatJobDescription(r),
              HasSubstr("Plan:      none (a job stored before job plans)"));
  v1::JobPlan& p = *r.mutable_plan();
  p.set_version(2);
  p.set_strategy(v1::MULTI_WORKER_MIRRORED);
  p.mutable_devices()->set_kind(v1::DevicePlan::GPU);
  p.mutable_communication()->set_backend(v1::CommunicationPlan::NCCL);
  p.mutable_communication()->set_bytes_per_pack(4 << 20);
  p.mutable_communication()->set_timeout_ms(60000);
  p.mutable_communication()->set_hierarchical(true);
  p.mutable_communication()->set_shm_heap(true);
  p.mutable_checkpoint()->set_every_steps(50);
  p.mutable_checkpoint()->set_keep(5);
  p.mutable_input()->set_eval(v1::InputPlan::HELD_OUT);
  p.mutable_input()->set_eval_fraction(0.2);
  p.mutable_input()->set_auto_shard_policy(v1::AUTO);
  p.mutable_input()->set_shuffle(true);
  p.set_summary_every_steps(10);
  p.mutable_restart()->set_max_restarts(3);
  p.mutable_restart()->set_min_workers(2);
  p.mutable_restart()->set_replacement_timeout_ms(10000);
  std::string text = FormatJobDescription(r);
  EXPECT_THAT(text, HasSubstr("Attempt:   0 (restarts: 0 of 3 allowed)\n"));
  EXPECT_THAT(text, HasSubstr("Plan:      version 2, MULTI_WORKER_MIRRORED on every ALIVE training "
                              "worker\n"));
  EXPECT_THAT(text, HasSubstr("  replicas:      one per GPU device of each worker\n"));
  EXPECT_THAT(text, HasSubstr("  communication: NCCL (from AUTO), packs 4.0 MiB, timeout 1m, "
                              "hierarchical\n"));
  EXPECT_THAT(text, HasSubstr("  checkpoints:   every 50 steps, keep 5, a copy on every worker\n"));
  EXPECT_THAT(text, HasSubstr("  input:         eval 0.2 of data.train held out, sharding AUTO, "
                              "shuffled; summaries every 10 steps\n"));
  EXPECT_THAT(text, HasSubstr("  restarts:      3 allowed; elastic: at least 2 workers, at most "
                              "every ALIVE training worker, replacement timeout 10s\n"));

  // Chosen by the spec, not AUTO; one device; the other eval inputs.
  r.mutable_spec()->mutable_communication()->set_implementation(v1::CommunicationSpec::RING);
  p.set_strategy(v1::ONE_DEVICE);
  p.set_workers(1);
  p.mutable_devices()->set_kind(v1::DevicePlan::CPU);
  p.mutable_devices()->set_per_worker(1);
  p.mutable_communication()->set_backend(v1::CommunicationPlan::LOCKSTEP_RING);
  p.mutable_communication()->set_bytes_per_pack(1536 << 10);
  p.mutable_communication()->set_hierarchical(false);
  p.mutable_communication()->set_encrypt(true);
  p.mutable_checkpoint()->set_every_steps(0);
  p.mutable_checkpoint()->set_copies(1);
  p.mutable_input()->set_eval(v1::InputPlan::SOURCE);
  p.mutable_restart()->set_min_workers(0);
  text = FormatJobDescription(r);
  EXPECT_THAT(text, HasSubstr("Plan:      version 2, ONE_DEVICE on 1 worker(s)\n"));
  EXPECT_THAT(text, HasSubstr("  replicas:      1 CPU per worker\n"));
  EXPECT_THAT(text, HasSubstr("  communication: LOCKSTEP_RING, packs 1.5 MiB, timeout 1m, flat, "
                              "encrypted\n"));
  EXPECT_THAT(text, HasSubstr("  checkpoints:   at the end only, keep 5, a copy on 1 worker(s)\n"));
  EXPECT_THAT(text, HasSubstr("  input:         eval data.eval,"));
  EXPECT_THAT(text, HasSubstr("  restarts:      3 allowed\n"));
  p.mutable_input()->set_eval(v1::InputPlan::NONE);
  EXPECT_THAT(FormatJobDescription(r), HasSubstr("  input:         eval none,"));
}

// --output=json: an indented object for one answer; one line per object for streams.
TEST(JobFormatTest, JsonIndentedOrOnOneLine) {
  v1::JobRecord j;
  j.set_id("job-000002");
  j.set_state(v1::CANCELLED);
  j.mutable_progress()->set_step(12);
  absl::StatusOr<std::string> indented = ToJson(j);
  absl::StatusOr<std::string> line = ToJsonLine(j);
  ASSERT_TRUE(indented.ok() && line.ok());
  EXPECT_THAT(*indented, HasSubstr("\n"));
  EXPECT_EQ(line->find('\n'), std::string::npos) << *line;
  EXPECT_THAT(*line, HasSubstr("\"state\":\"CANCELLED\""));
  EXPECT_THAT(*line, HasSubstr("\"progress\":{\"step\":\"12\"}"));
}

TEST(JobFormatTest, DescribeShowsTheHangVerdictAndStragglers) {
  v1::GetJobResponse r;
  r.mutable_job()->set_id("job-000003");
  r.mutable_job()->set_state(v1::RUNNING);
  EXPECT_THAT(FormatJobDescription(r), Not(HasSubstr("HANG")));
  r.mutable_diagnosis()->set_job_id("job-000003");
  r.mutable_diagnosis()->set_hang_verdict("all-reduce #7 (1 KiB): worker/0 waiting 2.0 s");
  r.mutable_diagnosis()->add_stragglers("worker/2: compute 31.00 ms per step");
  const std::string text = FormatJobDescription(r);
  EXPECT_THAT(text, HasSubstr("HANG:      all-reduce #7 (1 KiB): worker/0 waiting 2.0 s (lockstep "
                              "dump job-000003 shows every rank's flight record)\n"));
  EXPECT_THAT(text, HasSubstr("STRAGGLER: worker/2: compute 31.00 ms per step\n"));
  EXPECT_EQ(FormatDiagnosis(r.diagnosis(), "job-000003 ").rfind("job-000003 HANG:", 0), 0u);
}

// A worker's error text reaches the reason, the description and the watch lines: printed,
// its control characters are shown, not obeyed.
TEST(JobFormatTest, WorkersTextIsEscapedForTheTerminal) {
  v1::GetJobResponse r;
  v1::JobRecord* j = r.mutable_job();
  j->set_id("job-000002");
  j->set_state(v1::FAILED);
  j->set_reason("worker/1 failed: \x1b[2J\x1b[Hall good\rstep ok");
  for (const std::string& out :
       {FormatJobDescription(r), FormatJobResult(*j), FormatJobsTable({*j}, absl::Now())}) {
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  }
  EXPECT_THAT(FormatJobDescription(r), HasSubstr("\\x1b[2J\\x1b[Hall good\\rstep ok"));
  v1::JobEvent e;
  *e.mutable_job() = *j;
  e.set_message("\x1b]0;title\x07");
  EXPECT_EQ(FormatEventLine(e).find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace client
}  // namespace lockstep
