// The executor of every generated op: its validated argument struct and the kernel copies of
// the ISA levels this build compiled. The generated entry point fills a KernelSet with the
// functions of ops/<op>.cpp's per-level namespaces; the executor runs the copy of the level
// recorded at planning (aclOpExecutor::isa), the baseline when that level was not compiled.
#pragma once
#include <cstdint>

#include "aclnn_cpu/executor.h"
#include "aclnn_cpu/isa.h"
#include "aclnn_cpu/status.h"

namespace aclnn_cpu {

// One compiled copy of an op's kernel: its workspace query and its run.
template <class Args>
struct KernelCopy {
  uint64_t (*workspace)(const Args& args) = nullptr;
  aclnnStatus (*run)(const Args& args, void* workspace) = nullptr;
};

// The copies per ISA level, indexed by Isa; a level the build left out stays empty and runs the
// baseline copy.
template <class Args>
struct KernelSet {
  KernelCopy<Args> at_level[kIsaCount];

  const KernelCopy<Args>& at(Isa level) const {
    const KernelCopy<Args>& copy = at_level[static_cast<int>(level)];
    return copy.run != nullptr ? copy : at_level[0];
  }
};

template <class Args>
class KernelExecutor final : public aclOpExecutor {
 public:
  explicit KernelExecutor(const KernelSet<Args>& kernels) : kernels_(kernels) {}

  Args args;  // filled by the entry point after validation
  // Set instead of args when a succeed rule ended phase 1 (registry/README.md): the call has
  // nothing to compute, and its tensors may be ones no kernel could take (more than 8 dims).
  bool run_nothing = false;

  uint64_t workspace_bytes() const { return run_nothing ? 0 : kernels_.at(isa).workspace(args); }
  aclnnStatus run(void* workspace) override {
    return run_nothing ? kSuccess : kernels_.at(isa).run(args, workspace);
  }

 private:
  const KernelSet<Args>& kernels_;
};

}  // namespace aclnn_cpu
