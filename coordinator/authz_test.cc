#include "coordinator/authz.h"

#include <google/protobuf/descriptor.h>

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

const Principal kWorker{Role::kWorker, "worker-0"};
const Principal kViewer{Role::kViewer, "val"};
const Principal kOperator{Role::kOperator, "olga"};

// The proto's methods of `service`, by name.
std::set<std::string> ProtoMethods(Service service) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          std::string(ServiceName(service)));
  std::set<std::string> out;
  if (descriptor == nullptr) return out;
  for (int i = 0; i < descriptor->method_count(); ++i) out.insert(descriptor->method(i)->name());
  return out;
}

std::set<std::string> TableMethods(Service service) {
  std::set<std::string> out;
  for (absl::string_view m : AuthorizedMethods(service)) out.insert(std::string(m));
  return out;
}

TEST(AuthzTest, EachTableCoversItsProtoServiceExactly) {
  // Linked in, so that the generated pool holds coordinator.proto's services.
  ASSERT_NE(v1::GetClusterStatusRequest::descriptor(), nullptr);
  for (Service service : {Service::kWorker, Service::kJob}) {
    const std::set<std::string> proto = ProtoMethods(service);
    EXPECT_FALSE(proto.empty()) << ServiceName(service);
    EXPECT_EQ(TableMethods(service), proto) << ServiceName(service);
  }
}

TEST(AuthzTest, WorkerMethodsAreForWorkersOnly) {
  for (const char* m : {"RegisterWorker", "Heartbeat", "Deregister", "WatchAssignments", "SetKey",
                        "GetKey", "Barrier", "UploadCheckpoint"}) {
    EXPECT_TRUE(Authorize(Service::kWorker, m, kWorker).ok()) << m;
    for (const Principal& client : {kViewer, kOperator}) {
      absl::Status s = Authorize(Service::kWorker, m, client);
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << m;
      EXPECT_THAT(s.message(), HasSubstr("lockstep.v1.WorkerService is for worker only"));
    }
  }
}

TEST(AuthzTest, ViewersReadOperatorsChange) {
  for (const char* m : {"GetClusterStatus", "ListJobs", "GetJob", "WatchJob", "FetchCheckpoint"}) {
    EXPECT_TRUE(Authorize(Service::kJob, m, kViewer).ok()) << m;
    EXPECT_TRUE(Authorize(Service::kJob, m, kOperator).ok()) << m;
  }
  for (const char* m : {"SubmitJob", "CancelJob", "DrainWorker", "ReleaseTask"}) {
    EXPECT_TRUE(Authorize(Service::kJob, m, kOperator).ok()) << m;
    absl::Status s = Authorize(Service::kJob, m, kViewer);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << m;
    EXPECT_THAT(s.message(), HasSubstr("is for operator only"));
    EXPECT_THAT(s.message(), HasSubstr("viewer val"));
  }
}

TEST(AuthzTest, TheJobServiceAdmitsNoWorker) {
  for (absl::string_view m : AuthorizedMethods(Service::kJob)) {
    absl::Status s = Authorize(Service::kJob, m, kWorker);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << m;
    EXPECT_THAT(s.message(), HasSubstr("lockstep.v1.JobService is for viewer or operator only"));
    EXPECT_THAT(s.message(), HasSubstr("worker worker-0"));
  }
}

TEST(AuthzTest, AMethodIsAuthorizedOnlyInItsOwnService) {
  // The same principal, the same method name, the other service: refused.
  EXPECT_EQ(Authorize(Service::kJob, "Heartbeat", kWorker).code(),
            absl::StatusCode::kPermissionDenied);
  absl::Status s = Authorize(Service::kJob, "Heartbeat", kOperator);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("not in lockstep.v1.JobService's authorization table"));
  EXPECT_EQ(Authorize(Service::kWorker, "GetClusterStatus", kViewer).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authorize(Service::kWorker, "GetClusterStatus", kWorker).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(AuthzTest, NoCredentialsIsUnauthenticatedAndUnknownMethodsAreRefused) {
  EXPECT_EQ(Authorize(Service::kJob, "GetClusterStatus", std::nullopt).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(Service::kWorker, "Heartbeat", std::nullopt).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize(Service::kJob, "DropDatabase", kOperator).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(AuthzTest, CertificatesNameTheirPrincipal) {
  auto p = PrincipalFromCertificate("worker-3", "daemon");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->role, Role::kWorker);
  EXPECT_EQ(p->name, "worker-3");
  p = PrincipalFromCertificate("alice", "viewer");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->role, Role::kViewer);
  EXPECT_FALSE(PrincipalFromCertificate("x", "admin").has_value());
  EXPECT_FALSE(PrincipalFromCertificate("x", "").has_value());
  EXPECT_FALSE(PrincipalFromCertificate("", "daemon").has_value());
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
