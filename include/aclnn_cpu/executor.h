// The executor an aclnnXxxGetWorkspaceSize call returns. Generated code derives one class per op
// holding that op's argument struct (validated TensorViews + attributes) and implementing run().
#pragma once
#include <cstdint>
#include "aclnn_cpu/isa.h"
#include "aclnn_cpu/status.h"

struct aclOpExecutor {
  virtual ~aclOpExecutor() = default;
  // Runs the kernel at the ISA level recorded at planning time with a workspace of at least
  // workspace_size bytes (null when workspace_size == 0).
  virtual aclnnStatus run(void* workspace) = 0;

  const char* op_name = "";      // "aclnnSoftmaxBackward"
  uint64_t workspace_size = 0;
  aclnn_cpu::Isa isa = aclnn_cpu::Isa::Baseline;
  bool repeatable = false;
};

namespace aclnn_cpu {

// Makes `ex` known to the runtime (phase 2 refuses pointers it does not know) and returns it.
aclOpExecutor* register_executor(aclOpExecutor* ex);
// Phase 2 of every op: checks the executor is live and belongs to `op_name`, checks the
// workspace, runs, and destroys a non-repeatable executor afterwards (even on failure).
aclnnStatus run_executor(const char* op_name, void* workspace, uint64_t workspace_size,
                         aclOpExecutor* executor, void* stream);

}  // namespace aclnn_cpu
