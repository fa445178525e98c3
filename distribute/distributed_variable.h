// DistributedVariable: a variable as a strategy placed it (tf.distribute's variable
// creator inside Strategy::Scope()):
//   kPlain     made outside any scope: one tensor, not distributed;
//   kMirrored  Mirrored and MultiWorkerMirrored: one copy per local replica, on its device,
//              kept identical by applying the same all-reduced update to every copy;
//   kCentral   CentralStorage: one copy on the host CPU that every replica reads; a GPU
//              replica reads it through its own device buffer, which the variable keeps
//              (replica_buffer) and StrategyExtended::ReadForReplica refreshes with one
//              explicit host->device copy per step (the buffer is allocated once, then reused).
//
// Value type: copying aliases the tensors (engine::Tensor semantics), so a copy of a
// DistributedVariable is a handle to the same storage (replica buffers included). Not
// synchronised: updates happen in cross-replica context (StrategyExtended::Update) on one
// thread; each replica's thread writes only its own replica buffer.
#ifndef LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VARIABLE_H_
#define LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VARIABLE_H_

#include <memory>
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
  // A central variable: `value` on the host, read by `num_local_replicas` replicas.
  static DistributedVariable Central(std::string name, engine::Tensor value,
                                     int num_local_replicas) {
    DistributedVariable v(Kind::kCentral, std::move(name), {std::move(value)});
    v.replica_buffers_ = std::make_shared<std::vector<engine::Tensor>>(num_local_replicas);
    return v;
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
  // A central variable's device buffer for local replica `local_replica` (null tensor until
  // first read there; see StrategyExtended::ReadForReplica); nullptr for other kinds or
  // replicas. Shared by every handle of this variable.
  engine::Tensor* replica_buffer(int local_replica) const {
    if (replica_buffers_ == nullptr || local_replica < 0 ||
        local_replica >= static_cast<int>(replica_buffers_->size())) {
      return nullptr;
    }
    return &(*replica_buffers_)[local_replica];
  }

  // "MirroredVariable:{0: f32[] [1], 1: f32[] [1]}", "CentralVariable:...", "Variable:...".
  std::string DebugString() const;

 private:
  Kind kind_ = Kind::kPlain;
  std::string name_;
  std::vector<engine::Tensor> copies_;
  std::shared_ptr<std::vector<engine::Tensor>> replica_buffers_;  // kCentral only
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DISTRIBUTED_VARIABLE_H_
