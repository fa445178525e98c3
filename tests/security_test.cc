// The coordinator's security over real gRPC: TLS refuses plaintext clients, certificates
// from another CA and expired ones; tokens and certificates are authorized through
// coordinator/authz.h's table per service (the worker-facing service admits worker
// certificates only, the client-facing job service clients only); a worker identity holds
// its task, and stays bound to it until it deregisters or an operator releases it; rotated
// certificate files are taken without a restart; --insecure turns it all
// off and says so. The binaries refuse to start without TLS material unless --insecure.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "client/local_credentials.h"
#include "client/status_format.h"
#include "common/certs.h"
#include "common/incarnation.h"
#include "common/net.h"
#include "common/protocol_version.h"
#include "coordinator/grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/grpc_worker_service_client.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using testing::Result;
using testing::Runfile;
using testing::RunTool;
using testing::TmpDir;

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::CoordinatorServerOptions o;
    o.host = "127.0.0.1";
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto credentials = testing::SecureCoordinator(name, &o);
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    o.tls.reload_interval = absl::Seconds(1);
    credentials_ = std::make_unique<client::LocalCredentials>(std::move(*credentials));
    auto server = coordinator::CoordinatorServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // A client of the worker-facing service (as lockstepd's), with any credentials.
  std::unique_ptr<worker::GrpcWorkerServiceClient> WorkerClient(const TlsOptions& tls) {
    return std::move(
        worker::GrpcWorkerServiceClient::Create(server_->local_address(), tls, absl::Seconds(3))
            .value());
  }
  std::unique_ptr<worker::GrpcWorkerServiceClient> Worker(const std::string& name) {
    return WorkerClient(credentials_->Daemon(name).value());
  }
  // A client of the client-facing job service (as the CLI's), with any credentials.
  std::unique_ptr<client::JobServiceClient> Jobs(const TlsOptions& tls) {
    return std::move(
        client::JobServiceClient::Create(server_->local_address(), tls, absl::Seconds(3)).value());
  }

  static v1::RegisterWorkerRequest Registration(int index, uint64_t incarnation) {
    v1::RegisterWorkerRequest r;
    r.mutable_task()->set_type("worker");
    r.mutable_task()->set_index(index);
    r.set_address(absl::StrCat("127.0.0.1:", 31000 + index));
    r.set_incarnation(incarnation);
    r.set_protocol_version(kProtocolVersion);
    return r;
  }

  std::unique_ptr<client::LocalCredentials> credentials_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
};

TEST_F(SecurityTest, PlaintextClientsAreRefused) {
  auto status = Jobs(TlsOptions{.insecure = true})->GetClusterStatus();
  EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable) << status.status();
  EXPECT_EQ(WorkerClient(TlsOptions{.insecure = true})
                ->RegisterWorker(Registration(0, NewIncarnation()))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(SecurityTest, WorkerCertificateFromAnotherCaIsRefused) {
  auto rogue_ca = client::LocalCredentials::Create(TmpDir("rogue_ca"));
  ASSERT_TRUE(rogue_ca.ok()) << rogue_ca.status();
  TlsOptions rogue = rogue_ca->Daemon("worker-0").value();
  rogue.ca_file = credentials_->ca_file();  // it trusts the coordinator; not the reverse
  auto status = WorkerClient(rogue)->RegisterWorker(Registration(0, NewIncarnation()));
  EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable) << status.status();
  EXPECT_EQ(client::CountInState(*Jobs(credentials_->Viewer())->GetClusterStatus(), v1::ALIVE), 0);
}

TEST_F(SecurityTest, ExpiredWorkerCertificateIsRefused) {
  auto ca = CertificateAuthority::Open(credentials_->dir());
  ASSERT_TRUE(ca.ok()) << ca.status();
  CertRequest old;
  old.name = "worker-old";
  old.not_before = absl::Now() - absl::Hours(48);
  old.not_after = absl::Now() - absl::Hours(1);
  ASSERT_TRUE((*ca)->Issue(old).ok());
  TlsOptions expired = credentials_->Daemon("worker-old").value();  // the expired files
  auto status = WorkerClient(expired)->RegisterWorker(Registration(0, NewIncarnation()));
  EXPECT_EQ(status.status().code(), absl::StatusCode::kUnavailable) << status.status();
  // lockstepd refuses it at start, naming the flag and the reason.
  absl::Status check = CheckTlsOptions(expired, /*need_identity=*/true);
  EXPECT_THAT(check.message(), HasSubstr("--tls_cert"));
  EXPECT_THAT(check.message(), HasSubstr("expired"));
}

TEST_F(SecurityTest, TokensAreAuthenticatedAndAuthorizedByRole) {
  // No token, an unknown token: UNAUTHENTICATED.
  TlsOptions anonymous;
  anonymous.ca_file = credentials_->ca_file();
  EXPECT_EQ(Jobs(anonymous)->GetClusterStatus().status().code(),
            absl::StatusCode::kUnauthenticated);
  TlsOptions unknown = anonymous;
  unknown.token = NewBearerToken();
  EXPECT_EQ(Jobs(unknown)->GetClusterStatus().status().code(), absl::StatusCode::kUnauthenticated);

  // A viewer sees but does not change.
  EXPECT_TRUE(Jobs(credentials_->Viewer())->GetClusterStatus().ok());
  auto viewer = Jobs(credentials_->Viewer());
  EXPECT_TRUE(viewer->ListJobs().ok());
  auto submitted = viewer->SubmitJob(v1::JobSpec());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kPermissionDenied) << submitted.status();
  EXPECT_THAT(submitted.status().message(), HasSubstr("SubmitJob is for operator only"));
  EXPECT_THAT(submitted.status().message(), HasSubstr("viewer local-viewer"));
  EXPECT_EQ(viewer->CancelJob("job-000001").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(viewer->DrainWorker("worker/0", false).status().code(),
            absl::StatusCode::kPermissionDenied);

  // An operator gets past authorization to the job service (which refuses an empty spec).
  EXPECT_EQ(Jobs(credentials_->Operator())->SubmitJob(v1::JobSpec()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SecurityTest, ReplacedTokensTakeEffectAtOnce) {
  auto viewer = Jobs(credentials_->Viewer());
  ASSERT_TRUE(viewer->GetClusterStatus().ok());
  const std::string fresh = NewBearerToken();
  auto table = coordinator::TokenTable::Parse(absl::StrCat(fresh, " viewer fresh\n"), "test");
  ASSERT_TRUE(table.ok()) << table.status();
  server_->SetTokens(*std::move(table));
  // The same channel: a revoked token is refused from the next call on.
  EXPECT_EQ(viewer->GetClusterStatus().status().code(), absl::StatusCode::kUnauthenticated);
  TlsOptions tls = credentials_->Viewer();
  tls.token = fresh;
  EXPECT_TRUE(Jobs(tls)->GetClusterStatus().ok());
}

// Each service admits its own kind of caller only (authz.cc's table per service): a
// client's token, whatever its role, is refused by the worker-facing service, and a worker's
// certificate by the client-facing one, for reads and changes alike.
TEST_F(SecurityTest, ClientsNeverReachWorkerRpcsAndWorkersNeverClientRpcs) {
  for (const TlsOptions& client_tls : {credentials_->Operator(), credentials_->Viewer()}) {
    auto as_client = WorkerClient(client_tls);
    auto registered = as_client->RegisterWorker(Registration(0, NewIncarnation()));
    EXPECT_EQ(registered.status().code(), absl::StatusCode::kPermissionDenied)
        << registered.status();
    EXPECT_THAT(registered.status().message(),
                HasSubstr("lockstep.v1.WorkerService is for worker only"));
    EXPECT_EQ(as_client->GetKey("jobs/x/1/secret", absl::Milliseconds(10)).status().code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(as_client->SetKey("k", "v", true).code(), absl::StatusCode::kPermissionDenied);
    v1::BarrierRequest barrier;
    barrier.set_barrier_id("b");
    barrier.set_member("m");
    barrier.set_parties(1);
    EXPECT_EQ(as_client->Barrier(barrier).code(), absl::StatusCode::kPermissionDenied);
  }
  // No credentials at all: the worker service does not know who is calling.
  TlsOptions anonymous;
  anonymous.ca_file = credentials_->ca_file();
  EXPECT_EQ(
      WorkerClient(anonymous)->RegisterWorker(Registration(0, NewIncarnation())).status().code(),
      absl::StatusCode::kUnauthenticated);

  auto as_worker = Jobs(credentials_->Daemon("worker-0").value());
  auto status = as_worker->GetClusterStatus();
  EXPECT_EQ(status.status().code(), absl::StatusCode::kPermissionDenied) << status.status();
  EXPECT_THAT(status.status().message(),
              HasSubstr("lockstep.v1.JobService is for viewer or operator only"));
  EXPECT_THAT(status.status().message(), HasSubstr("worker worker-0"));
  EXPECT_EQ(as_worker->SubmitJob(v1::JobSpec()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(as_worker->CancelJob("job-000001").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(as_worker->DrainWorker("worker/0", false).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(as_worker->ListJobs().status().code(), absl::StatusCode::kPermissionDenied);

  auto worker = Worker("worker-0");
  EXPECT_TRUE(worker->SetKey("k", "v", true).ok());
  EXPECT_EQ(*worker->GetKey("k", absl::Milliseconds(10)), "v");
  // A job attempt's keys are its own workers' only, and only while it runs: no worker can
  // read another job's rendezvous keys or claim those of a job not yet submitted.
  absl::StatusOr<std::string> foreign =
      worker->GetKey("jobs/job-000001/1/ready/0", absl::Milliseconds(10));
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kPermissionDenied) << foreign.status();
  EXPECT_EQ(worker->SetKey("jobs/job-000007/1/addr/0", "10.0.0.9:1", true).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(SecurityTest, AWorkerIdentityHoldsItsTask) {
  auto a = Worker("host-a");
  auto b = Worker("host-b");
  const uint64_t incarnation = NewIncarnation();
  auto registered = a->RegisterWorker(Registration(0, incarnation));
  ASSERT_TRUE(registered.ok()) << registered.status();

  v1::HeartbeatRequest hb;
  *hb.mutable_task() = registered->task();
  hb.set_incarnation(incarnation);
  EXPECT_TRUE(a->Heartbeat(hb).ok());
  auto stolen = b->Heartbeat(hb);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kPermissionDenied) << stolen.status();
  EXPECT_THAT(stolen.status().message(), HasSubstr("task worker/0 is held by identity \"host-a\""));

  v1::WatchAssignmentsRequest watch;
  *watch.mutable_task() = registered->task();
  watch.set_incarnation(incarnation);
  auto stream = b->WatchAssignments(watch);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ((*stream)->Next().status().code(), absl::StatusCode::kPermissionDenied);

  v1::DeregisterRequest leave;
  *leave.mutable_task() = registered->task();
  leave.set_incarnation(incarnation);
  EXPECT_EQ(b->Deregister(leave).code(), absl::StatusCode::kPermissionDenied);
  // Re-registering host-a's incarnation under host-b is no retry either.
  EXPECT_EQ(b->RegisterWorker(Registration(0, incarnation)).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(a->Deregister(leave).ok());
}

// An attacker holding one worker's certificate (as a client built from proto/ would):
// it cannot break registration for everyone, take over another identity's task once it
// is LOST, keep an identity out by registering its address first, or hold more than its
// share of tasks. Only an operator releases a task from its identity (`lockstep release`).
TEST(IdentityBindingTest, OneWorkerCertificateCannotTakeOverTheCluster) {
  coordinator::CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  auto credentials = testing::SecureCoordinator("identity_binding", &o);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  o.membership.heartbeat_interval = absl::Milliseconds(200);
  o.membership.heartbeat_timeout = absl::Seconds(1);
  o.membership.max_tasks_per_identity = 3;
  auto server = coordinator::CoordinatorServer::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->local_address();
  auto worker = [&](const std::string& name) {
    return std::move(worker::GrpcWorkerServiceClient::Create(
                         address, credentials->Daemon(name).value(), absl::Seconds(3))
                         .value());
  };
  auto registration = [](const std::string& task, int index, const std::string& at) {
    v1::RegisterWorkerRequest r;
    r.mutable_task()->set_type(task);
    r.mutable_task()->set_index(index);
    r.set_address(at);
    r.set_incarnation(NewIncarnation());
    r.set_protocol_version(kProtocolVersion);
    return r;
  };
  auto attacker = worker("attacker");
  auto host1 = worker("host1");
  auto host2 = worker("host2");

  // A huge index: refused, naming the flag, and registration keeps working for everyone.
  auto huge = attacker->RegisterWorker(registration("ps", 2147483647, "10.9.9.9:1"));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_THAT(huge.status().message(), HasSubstr("--max_task_index"));
  EXPECT_THAT(huge.status().message(), HasSubstr("2147483647"));
  auto w1 = host1->RegisterWorker(registration("worker", 1, "10.0.0.1:7000"));
  ASSERT_TRUE(w1.ok()) << w1.status();

  // Squatting host2's address first does not keep host2 out.
  ASSERT_TRUE(attacker->RegisterWorker(registration("worker", 7, "10.0.0.2:7000")).ok());
  auto w2 = host2->RegisterWorker(registration("worker", 2, "10.0.0.2:7000"));
  EXPECT_TRUE(w2.ok()) << w2.status();

  // worker/1 goes silent: LOST, and still host1's.
  auto client = client::JobServiceClient::Create(address, credentials->Viewer()).value();
  auto state_of = [&](int index) {
    absl::StatusOr<v1::GetClusterStatusResponse> status = client->GetClusterStatus();
    if (!status.ok()) return v1::TASK_STATE_UNSPECIFIED;
    for (const v1::TaskStatus& t : status->tasks()) {
      if (t.task().type() == "worker" && t.task().index() == index) return t.state();
    }
    return v1::TASK_STATE_UNSPECIFIED;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (state_of(1) != v1::LOST && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));  // between polls of the status
  }
  ASSERT_EQ(state_of(1), v1::LOST);
  auto stolen = attacker->RegisterWorker(registration("worker", 1, "10.9.9.9:1"));
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kPermissionDenied) << stolen.status();
  EXPECT_THAT(stolen.status().message(), HasSubstr("worker/1 is bound to identity \"host1\""));

  // At most --max_tasks_per_identity tasks (3 here) per certificate, LOST ones included.
  ASSERT_TRUE(attacker->RegisterWorker(registration("worker", 8, "10.9.9.9:8")).ok());
  ASSERT_TRUE(attacker->RegisterWorker(registration("worker", 9, "10.9.9.9:9")).ok());
  auto greedy = attacker->RegisterWorker(registration("worker", 10, "10.9.9.9:10"));
  EXPECT_EQ(greedy.status().code(), absl::StatusCode::kResourceExhausted) << greedy.status();
  EXPECT_THAT(greedy.status().message(), HasSubstr("--max_tasks_per_identity"));
  EXPECT_EQ(state_of(10), v1::TASK_STATE_UNSPECIFIED);

  // Releasing is an operator's: a viewer and a worker are refused; `lockstep release` frees it.
  auto by_viewer = client->ReleaseTask("worker/1");
  EXPECT_EQ(by_viewer.status().code(), absl::StatusCode::kPermissionDenied) << by_viewer.status();
  EXPECT_THAT(by_viewer.status().message(), HasSubstr("ReleaseTask is for operator only"));
  auto as_worker = client::JobServiceClient::Create(address, credentials->Daemon("host2").value())
                       .value()
                       ->ReleaseTask("worker/1");
  EXPECT_EQ(as_worker.status().code(), absl::StatusCode::kPermissionDenied) << as_worker.status();
  const std::string dir = TmpDir("identity_binding_cli");
  std::vector<std::string> argv = {Runfile("client/lockstep"), "release", "worker/1",
                                   "--coordinator=" + address};
  for (const std::string& f : credentials->OperatorFlags()) argv.push_back(f);
  Result released = RunTool(argv, dir + "/release.out", {{"HOME", dir}});
  EXPECT_EQ(released.exit_code, 0) << released.output;
  EXPECT_THAT(released.output, HasSubstr("worker/1 released from identity host1"));
  EXPECT_EQ(state_of(1), v1::DEREGISTERED);
  auto taken = host2->RegisterWorker(registration("worker", 1, "10.0.0.3:7000"));
  EXPECT_TRUE(taken.ok()) << taken.status();
}

TEST_F(SecurityTest, ClientCertificatesCarryTheirRole) {
  auto ca = CertificateAuthority::Open(credentials_->dir());
  ASSERT_TRUE(ca.ok());
  CertRequest r;
  r.name = "val";
  r.client = true;
  r.role = "viewer";
  ASSERT_TRUE((*ca)->Issue(r).ok());
  TlsOptions tls = credentials_->Daemon("val").value();  // the files just issued
  EXPECT_TRUE(Jobs(tls)->GetClusterStatus().ok());
  EXPECT_EQ(Jobs(tls)->SubmitJob(v1::JobSpec()).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(WorkerClient(tls)->RegisterWorker(Registration(0, NewIncarnation())).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(SecurityTest, RotatedCertificatesAreTakenWithoutRestart) {
  // A new CA replaces the old one in the coordinator's files (renamed into place, as a
  // deployment would); within the reload interval, new connections need the new CA.
  const std::string next_dir = TmpDir("rotated");
  auto next = client::LocalCredentials::Create(next_dir);
  ASSERT_TRUE(next.ok()) << next.status();
  const std::string dir = credentials_->dir();
  for (const char* file : {"coordinator.crt", "coordinator.key", "ca.crt"}) {
    ASSERT_EQ(
        rename(absl::StrCat(next_dir, "/", file).c_str(), absl::StrCat(dir, "/", file).c_str()), 0);
  }
  TlsOptions next_worker = next->Daemon("worker-0").value();
  next_worker.ca_file = absl::StrCat(dir, "/ca.crt");
  bool rotated = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (!rotated && absl::Now() < deadline) {
    rotated = WorkerClient(next_worker)->RegisterWorker(Registration(0, NewIncarnation())).ok();
    if (!rotated) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(rotated) << "the coordinator never took the new certificates";
}

TEST(InsecureTest, EverythingIsAllowedAndStatusSaysSo) {
  coordinator::CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  o.tls.insecure = true;
  auto server = coordinator::CoordinatorServer::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  auto daemon = worker::GrpcWorkerServiceClient::Create((*server)->local_address(),
                                                        TlsOptions{.insecure = true});
  ASSERT_TRUE(daemon.ok());
  v1::RegisterWorkerRequest r;
  r.set_address("127.0.0.1:31000");
  r.set_incarnation(NewIncarnation());
  r.set_protocol_version(kProtocolVersion);
  EXPECT_TRUE((*daemon)->RegisterWorker(r).ok());
  // Under --insecure either service takes anyone.
  auto jobs =
      client::JobServiceClient::Create((*server)->local_address(), TlsOptions{.insecure = true});
  ASSERT_TRUE(jobs.ok());
  auto status = (*jobs)->GetClusterStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(status->insecure());
}

// Every quantity a caller controls has a limit with a clear error naming the flag that
// raises it (over real gRPC; plaintext, as the limits do not depend on TLS).
v1::JobSpec SyntheticJob(int64_t units) {
  v1::JobSpec spec;
  spec.set_name("limits");
  spec.set_num_workers(5);  // more than there are: it stays queued
  spec.mutable_model()->add_input_shape(8);
  spec.mutable_model()->add_layers()->mutable_dense()->set_units(units);
  spec.mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  spec.mutable_optimizer()->mutable_sgd();
  spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
  spec.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec.mutable_data()->mutable_train()->set_synthetic_examples(256);
  spec.set_global_batch_size(64);
  spec.set_steps(10);
  return spec;
}

// Waits (up to 10 s) until `n` streams are open under `key`.
bool WaitForWatches(coordinator::CoordinatorServer& server, const std::string& key, int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server.jobs()->watches().open(key) != n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST(LimitsTest, EveryQuantityACallerControlsIsLimited) {
  coordinator::CoordinatorServerOptions o;
  o.host = "127.0.0.1";
  o.tls.insecure = true;
  o.max_message_bytes = 64 << 10;
  o.kv.max_entries_per_job = 2;
  o.barriers.max_barriers_per_job = 1;
  o.jobs.max_pending_jobs = 1;
  o.jobs.limits.max_model_parameters = 100;
  o.jobs.watches.max_job_watches = 1;
  o.jobs.watches.max_assignment_watches_per_task = 1;
  auto server = coordinator::CoordinatorServer::Create(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const TlsOptions plain{.insecure = true};
  auto worker = worker::GrpcWorkerServiceClient::Create((*server)->local_address(), plain);
  ASSERT_TRUE(worker.ok());

  absl::Status big = (*worker)->SetKey("big", std::string(128 << 10, 'x'), false);
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  ASSERT_TRUE((*worker)->SetKey("jobs/j/1/a", "v", false).ok());
  ASSERT_TRUE((*worker)->SetKey("jobs/j/1/b", "v", false).ok());
  absl::Status keys = (*worker)->SetKey("jobs/j/1/c", "v", false);
  EXPECT_EQ(keys.code(), absl::StatusCode::kResourceExhausted) << keys;
  EXPECT_THAT(keys.message(), HasSubstr("--max_kv_entries_per_job"));
  v1::BarrierRequest barrier;
  barrier.set_barrier_id("jobs/j/1/x");
  barrier.set_member("m");
  barrier.set_parties(1);
  ASSERT_TRUE((*worker)->Barrier(barrier).ok());
  barrier.set_barrier_id("jobs/j/1/y");
  absl::Status barriers = (*worker)->Barrier(barrier);
  EXPECT_EQ(barriers.code(), absl::StatusCode::kResourceExhausted) << barriers;
  EXPECT_THAT(barriers.message(), HasSubstr("--max_barriers_per_job"));

  auto jobs = client::JobServiceClient::Create((*server)->local_address(), plain, absl::Seconds(5));
  ASSERT_TRUE(jobs.ok());
  absl::Status model = (*jobs)->SubmitJob(SyntheticJob(64)).status();
  EXPECT_EQ(model.code(), absl::StatusCode::kResourceExhausted) << model;
  EXPECT_THAT(model.message(), HasSubstr("--max_model_parameters"));
  absl::StatusOr<std::string> id = (*jobs)->SubmitJob(SyntheticJob(4));
  ASSERT_TRUE(id.ok()) << id.status();
  absl::Status queued = (*jobs)->SubmitJob(SyntheticJob(4)).status();
  EXPECT_EQ(queued.code(), absl::StatusCode::kResourceExhausted) << queued;
  EXPECT_THAT(queued.message(), HasSubstr("--max_pending_jobs"));

  // One WatchJob stream is open: a second is refused (no retry: give up at once).
  absl::StatusOr<v1::JobEvent> first;
  std::thread watcher([&] { first = (*jobs)->WatchJob(*id, [](const v1::JobEvent&) {}); });
  ASSERT_TRUE(WaitForWatches(**server, "", 1));
  absl::Status second = (*jobs)
                            ->WatchJob(
                                *id, [](const v1::JobEvent&) {}, absl::InfiniteFuture(), nullptr,
                                absl::ZeroDuration())
                            .status();
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  EXPECT_THAT(second.message(), HasSubstr("--max_job_watches"));
  ASSERT_TRUE((*jobs)->CancelJob(*id).ok());
  watcher.join();
  EXPECT_TRUE(first.ok()) << first.status();

  // One WatchAssignments stream per task.
  v1::RegisterWorkerRequest r;
  r.set_address("127.0.0.1:31000");
  r.set_incarnation(NewIncarnation());
  r.set_protocol_version(kProtocolVersion);
  auto registered = (*worker)->RegisterWorker(r);
  ASSERT_TRUE(registered.ok()) << registered.status();
  v1::WatchAssignmentsRequest watch;
  *watch.mutable_task() = registered->task();
  watch.set_incarnation(r.incarnation());
  auto stream = (*worker)->WatchAssignments(watch);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(WaitForWatches(**server, "worker/0", 1));
  auto again = (*worker)->WatchAssignments(watch);
  ASSERT_TRUE(again.ok());
  absl::Status refused = (*again)->Next().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("--max_assignment_watches_per_task"));
}

// A job naming files outside a worker's roots fails on the worker, naming the field and the
// flag, and nothing is written outside (real processes: the local cluster's roots are its work
// dir and the bundled data).
TEST(FileRootsTest, AJobsFilesOutsideTheWorkersRootsFailItNamingTheField) {
  client::LocalClusterOptions o = testing::LocalClusterFor("roots_cluster", 1);
  o.insecure = true;
  auto cluster = client::LocalCluster::StartCoordinator(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->StartWorkers().ok());
  ASSERT_TRUE((*cluster)->WaitForAlive(1, absl::Now() + absl::Seconds(20)).ok());
  auto jobs = client::JobServiceClient::Create((*cluster)->coordinator_address(),
                                               TlsOptions{.insecure = true}, absl::Seconds(10));
  ASSERT_TRUE(jobs.ok());
  const std::string outside = TmpDir("roots_outside");
  v1::JobSpec secret = testing::DigitsJob(o.work_dir + "/job");
  secret.mutable_data()->mutable_train()->set_files(0, "/etc/hostname");
  v1::JobSpec writes = testing::DigitsJob(o.work_dir + "/job");
  writes.mutable_summaries()->set_dir(outside + "/tb");
  for (const auto& [spec, field, flag] :
       {std::tuple{&secret, "data.train.files[0]: '/etc/hostname'", "--data_root"},
        std::tuple{&writes, "summaries.dir: ", "--output_root"}}) {
    absl::StatusOr<std::string> id = (*jobs)->SubmitJob(*spec);
    ASSERT_TRUE(id.ok()) << id.status();
    absl::StatusOr<v1::JobEvent> last = (*jobs)->WatchJob(
        *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(60));
    ASSERT_TRUE(last.ok()) << last.status();
    EXPECT_EQ(last->job().state(), v1::FAILED);
    EXPECT_THAT(last->job().reason(), HasSubstr(field));
    EXPECT_THAT(last->job().reason(), HasSubstr(flag));
  }
  EXPECT_FALSE(std::filesystem::exists(outside + "/tb"));
}

TEST(SecureByDefaultTest, BinariesRefuseToStartWithoutTlsMaterialUnlessInsecure) {
  const std::string dir = TmpDir("no_tls");
  Result coordinator = RunTool({Runfile("coordinator/lockstep-coordinator"), "--port=0",
                                absl::StrCat("--state_dir=", dir, "/state")},
                               dir + "/coordinator.out");
  EXPECT_EQ(coordinator.exit_code, 2) << coordinator.output;
  EXPECT_THAT(coordinator.output, HasSubstr("--tls_ca"));
  EXPECT_THAT(coordinator.output, HasSubstr("--insecure"));

  Result worker =
      RunTool({Runfile("worker/lockstepd"), "--coordinator=127.0.0.1:1"}, dir + "/worker.out");
  EXPECT_EQ(worker.exit_code, 2) << worker.output;
  EXPECT_THAT(worker.output, HasSubstr("--tls_ca"));

  Result cli = RunTool({Runfile("client/lockstep"), "status", "--coordinator=127.0.0.1:1"},
                       dir + "/cli.out", {{"HOME", dir}});
  EXPECT_EQ(cli.exit_code, 2) << cli.output;
  EXPECT_THAT(cli.output, HasSubstr("--tls_ca"));

  // With --insecure they start, and say what it costs.
  Result insecure =
      RunTool({Runfile("client/lockstep"), "status", "--insecure", "--coordinator=127.0.0.1:1"},
              dir + "/cli_insecure.out", {{"HOME", dir}});
  EXPECT_THAT(insecure.output, HasSubstr("warning: --insecure"));
}

TEST(SecureByDefaultTest, LocalClusterRunsTlsAndInsecureOnlyWhenAsked) {
  for (bool insecure : {false, true}) {
    client::LocalClusterOptions o;
    o.coordinator_bin = Runfile("coordinator/lockstep-coordinator");
    o.lockstepd_bin = Runfile("worker/lockstepd");
    o.workers = 1;
    o.work_dir = TmpDir(insecure ? "local_insecure" : "local_tls");
    o.insecure = insecure;
    auto cluster = client::LocalCluster::StartCoordinator(o);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    ASSERT_TRUE((*cluster)->StartWorkers().ok());
    auto status = (*cluster)->WaitForAlive(1, absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->insecure(), insecure);
    const std::string log = testing::ReadFile(o.work_dir + "/coordinator.log");
    if (insecure) {
      EXPECT_THAT(log, HasSubstr("authentication and authorization OFF"));
    } else {
      EXPECT_THAT(log, HasSubstr("(TLS)"));
      EXPECT_THAT(log, HasSubstr("identity worker-0"));
    }
    // `lockstep status` with the cluster's flags, and without a token.
    std::vector<std::string> argv = {Runfile("client/lockstep"), "status",
                                     "--coordinator=" + (*cluster)->coordinator_address()};
    std::vector<std::string> flags = (*cluster)->cli_flags();
    argv.insert(argv.end(), flags.begin(), flags.end());
    Result r = RunTool(argv, o.work_dir + "/status.out", {{"HOME", o.work_dir}});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("WARNING: the cluster runs --insecure") != std::string::npos, insecure)
        << r.output;
    if (!insecure) {
      Result anonymous = RunTool({Runfile("client/lockstep"), "status",
                                  "--coordinator=" + (*cluster)->coordinator_address(),
                                  "--tls_ca=" + (*cluster)->credentials()->ca_file()},
                                 o.work_dir + "/anonymous.out", {{"HOME", o.work_dir}});
      EXPECT_EQ(anonymous.exit_code, 1) << anonymous.output;
      EXPECT_THAT(anonymous.output, HasSubstr("no known credentials"));
    }
  }
}

// The README's "Security" steps with the real binaries: `lockstep certs` makes the material,
// the daemons run mutual TLS with it, and the CLI's token decides what it may do.
TEST(SecureByDefaultTest, ClusterByHandWithLockstepCerts) {
  const std::string dir = TmpDir("by_hand");
  const std::string tls = dir + "/tls";
  const std::string lockstep = Runfile("client/lockstep");
  auto run = [&](std::vector<std::string> argv) {
    Result r = RunTool(std::move(argv), dir + "/cli.out", {{"HOME", dir}});
    return r;
  };
  ASSERT_EQ(run({lockstep, "certs", "init", "--dir=" + tls}).exit_code, 0);
  EXPECT_EQ(run({lockstep, "certs", "init", "--dir=" + tls}).exit_code, 1);  // never overwritten
  ASSERT_EQ(run({lockstep, "certs", "issue", "--dir=" + tls, "--name=coordinator-host",
                 "--san=localhost,127.0.0.1"})
                .exit_code,
            0);
  ASSERT_EQ(run({lockstep, "certs", "issue", "--dir=" + tls, "--name=host1"}).exit_code, 0);
  Result op = run({lockstep, "certs", "token"});
  Result view = run({lockstep, "certs", "token"});
  ASSERT_EQ(op.exit_code, 0);
  const std::string op_token = op.output.substr(0, op.output.find('\n'));
  const std::string view_token = view.output.substr(0, view.output.find('\n'));
  ASSERT_EQ(op_token.size(), 64u) << op.output;
  {
    std::ofstream tokens(dir + "/tokens");
    tokens << op_token << " operator ops\n" << view_token << " viewer dash\n";
  }
  ASSERT_EQ(chmod((dir + "/tokens").c_str(), 0600), 0);  // the coordinator refuses others'

  SubprocessOptions c;
  c.argv = {Runfile("coordinator/lockstep-coordinator"),
            "--host=127.0.0.1",
            "--port=0",
            "--port_file=" + dir + "/port",
            "--state_dir=" + dir + "/state",
            "--tls_ca=" + tls + "/ca.crt",
            "--tls_cert=" + tls + "/coordinator-host.crt",
            "--tls_key=" + tls + "/coordinator-host.key",
            "--tokens_file=" + dir + "/tokens"};
  c.log_file = dir + "/coordinator.log";
  auto coordinator = Subprocess::Start(c);
  ASSERT_TRUE(coordinator.ok());
  absl::StatusOr<int> port = WaitForPortFile(dir + "/port", absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);

  SubprocessOptions w;
  w.argv = {Runfile("worker/lockstepd"), "--coordinator=" + address, "--tls_ca=" + tls + "/ca.crt",
            "--tls_cert=" + tls + "/host1.crt", "--tls_key=" + tls + "/host1.key"};
  w.unset_env = {"TF_CONFIG", "LOCKSTEP_COORDINATOR"};
  w.log_file = dir + "/lockstepd.log";
  auto worker = Subprocess::Start(w);
  ASSERT_TRUE(worker.ok());

  // `lockstep status` as the viewer until its output holds `expected` or `limit` passes.
  auto viewer_status_until = [&](const std::string& expected, absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    Result r;
    do {
      r = run({lockstep, "status", "--coordinator=" + address, "--tls_ca=" + tls + "/ca.crt",
               "--token=" + view_token});
      absl::SleepFor(absl::Milliseconds(20));  // between polls: each starts a process
    } while (r.output.find(expected) == std::string::npos && absl::Now() < deadline);
    return r;
  };
  Result r = viewer_status_until("1 ALIVE", absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1 task(s): 1 ALIVE"));
  EXPECT_THAT(testing::ReadFile(dir + "/coordinator.log"), HasSubstr("identity host1"));

  // The token may come from the config file too; a viewer may not cancel.
  {
    std::ofstream config(dir + "/config");
    config << "coordinator: " << address << "\nca: " << tls << "/ca.crt\ntoken: " << view_token
           << "\n";
  }
  r = run({lockstep, "cancel", "job-000001", "--config=" + dir + "/config"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("CancelJob is for operator only"));
  r = run({lockstep, "cancel", "job-000001", "--config=" + dir + "/config", "--token=" + op_token});
  EXPECT_THAT(r.output, HasSubstr("job-000001 not found")) << r.output;  // authorized

  // SIGHUP reloads the tokens file: the viewer's token, removed, is refused.
  {
    std::ofstream tokens(dir + "/tokens", std::ios::trunc);
    tokens << op_token << " operator ops\n";
  }
  (*coordinator)->Signal(SIGHUP);
  r = viewer_status_until("no known credentials", absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no known credentials"));
  EXPECT_THAT(testing::ReadFile(dir + "/coordinator.log"), HasSubstr("1 client token(s) reloaded"));

  (*worker)->Stop(absl::Seconds(3));
  (*coordinator)->Stop(absl::Seconds(3));
}

}  // namespace
}  // namespace lockstep
