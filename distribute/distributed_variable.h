// DistributedVariable: a variable as a strategy placed it (tf.distribute's variable
// creator inside Strategy::Scope()):
//   kPlain     made outside any scope: one tensor, not distributed;
//   kMirrored  Mirrored and MultiWorkerMirrored: one copy per local replica, on its device,
//              kept identical by applying the same all-reduced update to every copy;
//   kCentral   CentralStorage: one copy on the host CPU that every replica reads.
//
// Value type: copying aliases the tensors (engine::Tensor semantics), so a copy of a
// DistributedVariable is a handle to the same storage. Not synchronised: updates happen in
// cross-replica context (StrategyExtended::Update) on one thread.
#ifndef LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VARIABLE_H_
#define LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VARIABLE_H_

#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace lockstep::distribute {

class DistributedVariable {
 public:
  enum class Kind { kPlain, kMirrored, kCentral };

  DistributedVariable() = default;
  DistributedVariable(Kind kind, std::string name, std::vector<engine::Tensor> copies)
      : kind_(kind), name_(std::move(name)), copies_(std::move(copies)) {}
  static DistributedVariable Plain(std::string name, engine::Tensor value) {
    return DistributedVariable(Kind::kPlain, std::move(name), {std::move(value)});
  }

  Kind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  int num_copies() const { return static_cast<int>(copies_.size()); }
  // What local replica `local_replica` reads: its own copy, or the single copy.
  const engine::Tensor& Read(int local_replica) const {
    return copies_.size() == 1 ? copies_[0] : copies_[local_replica];
  }
  engine::Tensor& copy(int i) { return copies_[i]; }
  const std::vector<engine::Tensor>& copies() const { return copies_; }

  // "MirroredVariable:{0: f32[] [1], 1: f32[] [1]}", "CentralVariable:...", "Variable:...".
  std::string DebugString() const;

 private:
  Kind kind_ = Kind::kPlain;
  std::string name_;
  std::vector<engine::Tensor> copies_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VARIABLE_H_
