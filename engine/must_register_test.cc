// MustRegister on a registry of its own shape: a registration that succeeds lands in the
// registry, one that fails aborts naming the registry and the reason (the op and layer
// registries' own aborts: builtin_layers_test, builtin_ops_test).
#include "engine/must_register.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

struct NameDef {
  std::string name;
  int arity = 0;
};

class NameRegistry {
 public:
  using Def = NameDef;
  static constexpr char kName[] = "test name registry";

  absl::Status Register(NameDef def) {
    if (!names_.insert(def.name).second) {
      return absl::AlreadyExistsError(absl::StrCat("name ", def.name, " is registered twice"));
    }
    return absl::OkStatus();
  }
  const std::set<std::string>& names() const { return names_; }

 private:
  std::set<std::string> names_;
};

TEST(MustRegister, RegistersABracedDefinition) {
  NameRegistry r;
  MustRegister(&r, {"a", 1});
  MustRegister(&r, {"b"});
  EXPECT_EQ(r.names(), (std::set<std::string>{"a", "b"}));
}

TEST(MustRegister, AFailedRegistrationAbortsNamingTheRegistryAndTheReason) {
  EXPECT_DEATH(
      {
        NameRegistry r;
        MustRegister(&r, {"a"});
        MustRegister(&r, {"a"});
      },
      "test name registry: name a is registered twice");
}

}  // namespace
}  // namespace lockstep::engine
