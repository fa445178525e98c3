// An identity the cluster trusts, turned against it: a second worker certificate ("attacker")
// and a viewer token ("mallory") against a coordinator over real gRPC and TLS, in one process.
// What each does fails on a coordinator without the bounds of coordinator/wait_limits.h,
// watch_limits.h and diagnostics_service.h:
//   - diagnostics (log lines with terminal escapes, a forged flight record) for someone else's
//     job are not kept: `GetJobLogs` and the hang verdict show the victim's only;
//   - 4096 GetKey waits from one task are refused past its own share and never stall another
//     job's rendezvous;
//   - a flood of `logs --follow` streams from one identity stops at its own limit while another
//     viewer still watches;
//   - a revoked token's, or a revoked certificate's, open streams end within seconds;
//   - streams past the server's thread quota are refused.
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/job_service_client.h"
#include "client/local_credentials.h"
#include "common/certs.h"
#include "common/grpc_channel.h"
#include "common/incarnation.h"
#include "common/protocol_version.h"
#include "coordinator/grpc_server.h"
#include "coordinator/revoked_certificates.h"
#include "coordinator/token_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockstep/v1/coordinator.grpc.pb.h"
#include "tests/test_util.h"
#include "worker/grpc_worker_service_client.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

class HostileWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::CoordinatorServerOptions o;
    o.host = "127.0.0.1";
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto credentials = testing::SecureCoordinator(name, &o);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    credentials_ = std::make_unique<client::LocalCredentials>(std::move(*credentials));
    // Nobody heartbeats in the background here: no task goes LOST during a test.
    o.membership.heartbeat_timeout = absl::Minutes(5);
    auto server = coordinator::CoordinatorServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);

    // host0 runs worker/0 and the victim's job on it; the attacker then registers worker/1.
    victim_ = Worker("host0");
    attacker_ = Worker("attacker");
    victim_task_ = Register(*victim_, 0);
    ASSERT_FALSE(victim_task_.type().empty());
    operator_ = client::JobServiceClient::Create(server_->local_address(), credentials_->Operator(),
                                                 absl::Seconds(5))
                    .value();
    absl::StatusOr<std::string> id = operator_->SubmitJob(OneWorkerJob());
    ASSERT_TRUE(id.ok()) << id.status();
    job_id_ = *id;
    auto job = operator_->GetJob(job_id_);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->job().state(), v1::RUNNING);
    ASSERT_EQ(job->job().attempt(), 1);
    attacker_task_ = Register(*attacker_, 1);
    ASSERT_FALSE(attacker_task_.type().empty());
  }

  std::unique_ptr<worker::GrpcWorkerServiceClient> Worker(const std::string& name) {
    return std::move(worker::GrpcWorkerServiceClient::Create(server_->local_address(),
                                                             credentials_->Daemon(name).value(),
                                                             absl::Seconds(5))
                         .value());
  }

  v1::TaskId Register(worker::GrpcWorkerServiceClient& w, int index) {
    v1::RegisterWorkerRequest r;
    r.mutable_task()->set_type("worker");
    r.mutable_task()->set_index(index);
    r.set_address(absl::StrCat("127.0.0.1:", 32000 + index));
    r.set_incarnation(NewIncarnation());
    r.set_protocol_version(kProtocolVersion);
    r.add_devices()->set_index(0);
    auto registered = w.RegisterWorker(r);
    EXPECT_TRUE(registered.ok()) << registered.status();
    incarnations_[index] = r.incarnation();
    return registered.ok() ? registered->task() : v1::TaskId();
  }

  // Public: the thread quota test submits one too.
 public:
  static v1::JobSpec OneWorkerJob() {
    v1::JobSpec spec;
    spec.set_name("victim");
    spec.set_num_workers(1);
    spec.mutable_model()->add_input_shape(8);
    spec.mutable_model()->add_layers()->mutable_dense()->set_units(4);
    spec.mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
    spec.mutable_optimizer()->mutable_sgd();
    spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
    spec.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
    spec.mutable_data()->mutable_train()->set_synthetic_examples(256);
    spec.set_global_batch_size(64);
    spec.set_steps(10);
    return spec;
  }

 protected:
  // A heartbeat of `task` carrying diagnostics of the victim's job, attempt 1.
  v1::HeartbeatRequest DiagnosticsBeat(const v1::TaskId& task, int index,
                                       const std::vector<std::string>& lines, int64_t wait_s) {
    v1::HeartbeatRequest hb;
    *hb.mutable_task() = task;
    hb.set_incarnation(incarnations_[index]);
    v1::JobDiagnostics* d = hb.add_diagnostics();
    d->set_job_id(job_id_);
    d->set_attempt(1);
    const int64_t now = absl::ToUnixMicros(absl::Now());
    v1::FlightRecord* r = d->mutable_record();
    r->set_job_id(job_id_);
    r->set_attempt(1);
    r->set_recorded_unix_micros(now);
    r->set_phase(v1::PHASE_ALL_REDUCE);
    r->set_phase_entered_unix_micros(now - wait_s * 1'000'000);
    r->set_last_seq_entered(7);
    v1::CollectiveRecord* c = r->add_collectives();
    c->set_seq(7);
    c->set_kind("all-reduce");
    c->set_entered_unix_micros(now - wait_s * 1'000'000);
    int64_t seq = 1;
    for (const std::string& text : lines) {
      v1::LogLine* line = d->add_log_lines();
      line->set_seq(seq++);
      line->set_unix_micros(now);
      line->set_text(text);
    }
    return hb;
  }

  // The viewer tokens of the cluster plus extra `name`s (each a viewer, its token returned).
  std::map<std::string, std::string> AddViewers(const std::vector<std::string>& names,
                                                const std::string& leave_out = "") {
    std::string table = absl::StrCat(credentials_->Operator().token, " operator op\n",
                                     credentials_->Viewer().token, " viewer viewer\n");
    for (const std::string& name : names) {
      if (!tokens_.count(name)) tokens_[name] = NewBearerToken();
      if (name != leave_out) absl::StrAppend(&table, tokens_[name], " viewer ", name, "\n");
    }
    auto parsed = coordinator::TokenTable::Parse(table, "test");
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    server_->SetTokens(*std::move(parsed));
    return tokens_;
  }

  std::unique_ptr<v1::JobService::Stub> JobStub(const std::string& token) {
    TlsOptions tls = credentials_->Viewer();
    tls.token = token;
    return v1::JobService::NewStub(CoordinatorChannel(server_->local_address(), tls).value());
  }

  // Waits (up to 10 s) until `n` streams are open under `key` (watch_limits.h's keys).
  bool WaitForStreams(const std::string& key, int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (server_->jobs()->watches().open(key) != n) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));  // between polls of the count
    }
    return true;
  }

  std::unique_ptr<client::LocalCredentials> credentials_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::unique_ptr<worker::GrpcWorkerServiceClient> victim_;
  std::unique_ptr<worker::GrpcWorkerServiceClient> attacker_;
  std::unique_ptr<client::JobServiceClient> operator_;
  std::map<int, uint64_t> incarnations_;
  std::map<std::string, std::string> tokens_;
  v1::TaskId victim_task_;
  v1::TaskId attacker_task_;
  std::string job_id_;
};

TEST_F(HostileWorkerTest, DiagnosticsForSomeoneElsesJobAreNotKept) {
  // The attacker's heartbeat is answered (it is its own task), but what it says about the
  // victim's job is dropped: escape sequences, a made-up line and a record that would make a
  // hang verdict.
  auto forged = attacker_->Heartbeat(DiagnosticsBeat(
      attacker_task_, 1, {"\x1b[2J\x1b[Hjob finished, all good", "\rloss 0.0000"}, 60));
  ASSERT_TRUE(forged.ok()) << forged.status();
  auto real = victim_->Heartbeat(DiagnosticsBeat(victim_task_, 0, {"step 1 loss 2.3"}, 0));
  ASSERT_TRUE(real.ok()) << real.status();

  v1::GetJobLogsRequest request;
  request.set_job_id(job_id_);
  std::vector<std::string> lines;
  auto viewer = client::JobServiceClient::Create(server_->local_address(), credentials_->Viewer(),
                                                 absl::Seconds(5))
                    .value();
  absl::Status logs = viewer->GetJobLogs(request, [&](const v1::JobLogLines& m) {
    for (const v1::LogLine& l : m.lines()) {
      lines.push_back(absl::StrCat(m.task().type(), "/", m.task().index(), " ", l.text()));
    }
  });
  ASSERT_TRUE(logs.ok()) << logs;
  EXPECT_THAT(lines, ::testing::ElementsAre("worker/0 step 1 loss 2.3"));
  auto dump = viewer->DumpJob(job_id_);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->diagnosis().hang_verdict(), "");
  ASSERT_EQ(dump->diagnosis().ranks_size(), 1);
  EXPECT_EQ(dump->diagnosis().ranks(0).task().index(), 0);

  // Nor do its reports on the victim's attempt count: a forged failure and a forged success
  // leave the job RUNNING at the step its own worker reported.
  v1::HeartbeatRequest progress;
  *progress.mutable_task() = victim_task_;
  progress.set_incarnation(incarnations_[0]);
  v1::JobReport* own = progress.add_jobs();
  own->set_job_id(job_id_);
  own->set_attempt(1);
  own->set_phase(v1::JobReport::TRAINING);
  own->set_step(3);
  own->set_total_steps(10);
  ASSERT_TRUE(victim_->Heartbeat(progress).ok());
  for (v1::JobReport::Phase phase : {v1::JobReport::FAILED, v1::JobReport::DONE}) {
    v1::HeartbeatRequest report;
    *report.mutable_task() = attacker_task_;
    report.set_incarnation(incarnations_[1]);
    v1::JobReport* r = report.add_jobs();
    r->set_job_id(job_id_);
    r->set_attempt(1);
    r->set_phase(phase);
    r->set_step(10);
    r->set_total_steps(10);
    r->set_error("forged");
    ASSERT_TRUE(attacker_->Heartbeat(report).ok());
  }
  auto job = operator_->GetJob(job_id_);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job().state(), v1::RUNNING) << job->job().reason();
  EXPECT_EQ(job->job().progress().step(), 3);
}

TEST_F(HostileWorkerTest, FourThousandWaitsFromOneTaskDoNotStallAnotherJobsRendezvous) {
  constexpr int kFlood = 4096;
  const int share = coordinator::WaitLimitOptions{}.max_per_caller;
  TlsOptions tls = credentials_->Daemon("attacker").value();
  auto stub = v1::WorkerService::NewStub(CoordinatorChannel(server_->local_address(), tls).value());
  struct Call {
    grpc::ClientContext ctx;
    v1::GetKeyResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::GetKeyResponse>> reader;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kFlood; ++i) {
    auto c = std::make_unique<Call>();
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
    v1::GetKeyRequest r;
    r.set_key(absl::StrCat(i % 2 == 0 ? "shared/never/" : "jobs/none/1/never/", i));
    r.set_timeout_ms(int64_t{24} * 3600 * 1000);  // a day: cut to --max_wait_ms
    c->reader = stub->AsyncGetKey(&c->ctx, r, &cq);
    c->reader->Finish(&c->response, &c->status, c.get());
    calls.push_back(std::move(c));
  }
  // Everything past the attacker's share comes back at once, refused.
  int refused = 0;
  int other = 0;
  std::string message;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (refused + other < kFlood - share && absl::Now() < deadline) {
    void* tag = nullptr;
    bool ok = false;
    if (cq.AsyncNext(&tag, &ok,
                     std::chrono::system_clock::now() + std::chrono::milliseconds(200)) !=
        grpc::CompletionQueue::GOT_EVENT) {
      continue;
    }
    const grpc::Status& s = static_cast<Call*>(tag)->status;
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      message = s.error_message();
    } else {
      ++other;  // the keys under jobs/none/ are not the attacker's: PERMISSION_DENIED
    }
  }
  EXPECT_EQ(refused + other, kFlood - share);
  EXPECT_GT(refused, 0);
  EXPECT_THAT(message, HasSubstr("--max_waiting_calls_per_caller"));

  // The victim's rendezvous in its own job is admitted to wait (it waits out its timeout
  // rather than being refused), and answered once its peer publishes the key.
  const std::string key = absl::StrCat("jobs/", job_id_, "/1/rank0/addr");
  absl::StatusOr<std::string> waited = victim_->GetKey(key, absl::Milliseconds(300));
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded) << waited.status();
  absl::StatusOr<std::string> got;
  std::thread waiter([&] { got = victim_->GetKey(key, absl::Seconds(20)); });
  ASSERT_TRUE(victim_->SetKey(key, "127.0.0.1:5000", false).ok());
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "127.0.0.1:5000");
  v1::BarrierRequest barrier;
  barrier.set_barrier_id(absl::StrCat("jobs/", job_id_, "/1/init"));
  barrier.set_member("worker/0");
  barrier.set_parties(1);
  barrier.set_timeout_ms(5000);
  EXPECT_TRUE(victim_->Barrier(barrier).ok());

  for (auto& c : calls) c->ctx.TryCancel();
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(HostileWorkerTest, AStreamFloodStopsAtItsIdentitysLimitAndARevokedTokenEndsItsStreams) {
  const int limit = coordinator::WatchLimitOptions{}.max_streams_per_identity;
  AddViewers({"mallory", "alice"});
  auto mallory = JobStub(tokens_["mallory"]);
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::JobLogLines>> reader;
  };
  v1::GetJobLogsRequest follow;
  follow.set_job_id(job_id_);
  follow.set_follow(true);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i <= limit; ++i) {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    s->reader = mallory->GetJobLogs(&s->ctx, follow);
    if (i < limit) {
      ASSERT_TRUE(WaitForStreams("identity:mallory", i + 1)) << i;
    }
    streams.push_back(std::move(s));
  }
  // One stream more than the limit: refused at once.
  v1::JobLogLines lines;
  EXPECT_FALSE(streams.back()->reader->Read(&lines));
  grpc::Status over = streams.back()->reader->Finish();
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_THAT(over.error_message(), HasSubstr("--max_streams_per_identity"));
  streams.pop_back();

  // Another viewer still watches.
  auto alice = JobStub(tokens_["alice"]);
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WatchJobRequest watch;
  watch.set_job_id(job_id_);
  auto watcher = alice->WatchJob(&watch_ctx, watch);
  v1::JobEvent event;
  ASSERT_TRUE(watcher->Read(&event));
  EXPECT_EQ(event.job().state(), v1::RUNNING);

  // Mallory's token is revoked (the tokens file edited, SIGHUP): every open stream of hers
  // ends, UNAUTHENTICATED, within seconds; alice's goes on.
  const absl::Time revoked = absl::Now();
  AddViewers({"mallory", "alice"}, /*leave_out=*/"mallory");
  for (auto& s : streams) {
    EXPECT_FALSE(s->reader->Read(&lines));
    grpc::Status ended = s->reader->Finish();
    EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED) << ended.error_message();
  }
  EXPECT_LT(absl::Now() - revoked, absl::Seconds(5));
  EXPECT_TRUE(WaitForStreams("identity:mallory", 0));
  EXPECT_EQ(server_->jobs()->watches().open("identity:alice"), 1);
  watch_ctx.TryCancel();
  while (watcher->Read(&event)) {
  }
  watcher->Finish();
}

// A stolen worker certificate is revoked by name (--revoked_certificates_file, SIGHUP): its
// open WatchAssignments stream ends, UNAUTHENTICATED, within seconds, and its calls are
// refused; the other identities go on.
TEST_F(HostileWorkerTest, ARevokedCertificatesOpenStreamEnds) {
  v1::WatchAssignmentsRequest watch;
  *watch.mutable_task() = attacker_task_;
  watch.set_incarnation(incarnations_[1]);
  auto stream = attacker_->WatchAssignments(watch);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(WaitForStreams("identity:attacker", 1));
  absl::StatusOr<std::optional<v1::Assignment>> next;
  std::thread reader([&] { next = (*stream)->Next(); });
  const absl::Time revoked = absl::Now();
  server_->SetRevoked(coordinator::RevokedCertificates::Parse("attacker\n", "test").value());
  reader.join();
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnauthenticated) << next.status();
  EXPECT_LT(absl::Now() - revoked, absl::Seconds(5));
  v1::HeartbeatRequest hb;
  *hb.mutable_task() = attacker_task_;
  hb.set_incarnation(incarnations_[1]);
  EXPECT_EQ(attacker_->Heartbeat(hb).status().code(), absl::StatusCode::kUnauthenticated);
  *hb.mutable_task() = victim_task_;
  hb.set_incarnation(incarnations_[0]);
  EXPECT_TRUE(victim_->Heartbeat(hb).ok());
}

// The server's threads are a quota (--max_server_threads): streams that each hold a thread
// (here from a coordinator under --insecure, where no identity limits them) are refused past
// it, RESOURCE_EXHAUSTED, instead of starting threads without end; the server answers again
// once they close.
TEST(ServerThreadsTest, StreamsPastTheThreadQuotaAreRefusedAndTheServerRecovers) {
  coordinator::CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  o.tls.insecure = true;
  o.max_server_threads = 16;
  auto server = coordinator::CoordinatorServer::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const TlsOptions plain{.insecure = true};
  auto jobs = client::JobServiceClient::Create((*server)->local_address(), plain).value();
  v1::JobSpec spec = HostileWorkerTest::OneWorkerJob();
  spec.set_num_workers(3);  // there are none: it stays PENDING
  absl::StatusOr<std::string> id = jobs->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();

  auto stub =
      v1::JobService::NewStub(CoordinatorChannel((*server)->local_address(), plain).value());
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
  };
  std::vector<std::unique_ptr<Stream>> streams;
  int accepted = 0;
  int refused = 0;
  std::string message;
  for (int i = 0; i < 40; ++i) {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchJobRequest watch;
    watch.set_job_id(*id);
    s->reader = stub->WatchJob(&s->ctx, watch);
    v1::JobEvent event;
    if (s->reader->Read(&event)) {  // the first event comes at once
      ++accepted;
      streams.push_back(std::move(s));
      continue;
    }
    grpc::Status status = s->reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    message = status.error_message();
    ++refused;
  }
  EXPECT_LT(accepted, o.max_server_threads);
  EXPECT_GT(refused, 0);
  for (auto& s : streams) s->ctx.TryCancel();
  for (auto& s : streams) {
    v1::JobEvent event;
    while (s->reader->Read(&event)) {
    }
    s->reader->Finish();
  }
  // The threads came back: calls are answered again (within a few seconds).
  absl::Status status;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    status = jobs->GetClusterStatus().status();
  } while (!status.ok() && absl::Now() < deadline);
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace lockstep
