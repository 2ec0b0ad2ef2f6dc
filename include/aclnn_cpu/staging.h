// Staged operands: a kernel's dense code run on strided operands.
//
// A kernel whose fast paths want their operands dense (row-major, unit stride) runs them on
// copies of the operands no fast path takes as they are: it declares each operand of the call
// with the view the copies read or write and whether it moves (Staging::add), and plans how they
// move, in one of two ways that give the bits of the same call on contiguous copies (values move
// bit for bit):
//   * task by task (plan_tasks, plan_fixed_tasks): the call's elements, in row-major order of
//     the operands' common shape, are cut into tasks of whole units (rows, slabs, planes,
//     groups). Each task copies its range of every moving input into its thread's slot in the
//     workspace, runs the dense code there (operands that do not move in place) and copies its
//     range of every moving output back (run_staged): the copies stay in L2, where whole copies
//     go through the last-level cache or beyond it;
//   * whole (plan_whole): each moving operand gets a dense buffer in the workspace, copied in
//     before the kernel (copy_in) and out after it (copy_out).
//
// How a kernel uses it (its prepare(given, at) returns a Prepared<Args, Plan>, as
// prepare_in wants; `at` is where the moves' workspace starts, null for the size query):
//
//   enum { kX, kY };  // the operands, in the order they are added
//   Prepared<MyArgs, Plan> p{given, make_plan(given), Staging(at)};
//   // (first the layouts a fast path takes in place: TensorView::memory_order and the tests
//   // built on it, to_planes_in_memory_order below)
//   Staging& s = p.staging;
//   s.add(given.self, Staging::kIn, !given.self.is_contiguous());  // -> kX
//   s.add(given.out, Staging::kOut, !given.out.is_contiguous());   // -> kY
//   if (s.any() && !s.plan_tasks(total, unit, grain)) {  // plan_tasks true: staged
//     s.plan_whole();
//     p.args.self = s.view(kX), p.args.out = s.view(kY);  // the dense copies
//     p.plan = make_plan(p.args);
//   }
//   p.kernel_bytes = ...;  // the kernel's own scratch, before the moves' workspace
//
// and runs it as
//
//   const auto p = prepare_in(workspace, [&](char* at) { return prepare(given, at); });
//   if (p.staging.staged()) {
//     run_staged(p.staging, [&](const StagedTask& task) {  // elements [first, first + count)
//       dense_code(task.in<const T>(kX), task.out<T>(kY), task.count);
//     });
//   } else {
//     p.staging.copy_in();
//     run(p.args, p.plan, workspace);
//     p.staging.copy_out();
//   }
//
// A task's `unit` makes each task whole rows (or whatever the dense code takes as a whole): the
// dense code then sees, in each task, what it sees in the same range of a contiguous call.
// Workspace sizes depend only on shapes, dtypes and layouts, never on the thread count.
//
// For kernel translation units (compiled per ISA level).
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>

#include "aclnn_cpu/dense_copy.h"
#include "aclnn_cpu/flat_values.h"
#include "aclnn_cpu/parallel.h"
#include "aclnn_cpu/tensor_view.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {

// The sizing rules of staged tasks, shared by every kernel that stages:
constexpr uint64_t kStageTaskBytes = 64 << 10;      // one operand's share of a task, about
constexpr uint64_t kStageUnitMaxBytes = 256 << 10;  // a unit (row, slab, plane, strip) at most
constexpr int64_t kStageMinTasks = 4;               // fewest tasks, where the units allow
constexpr int64_t kStageMaxSlots = 32;              // threads that get a slot
constexpr uint64_t kStageSlotBudget = 16 << 20;     // bytes all slots may take together

// The elements a task must be a whole number of: the kernel's own `unit` (a row, slab or plane),
// grown so that each staged operand that is a transposed pair (transposed planes, channels-last)
// is copied in whole rows of its inner dim and, where they fit, whole planes of the pair, else
// strips of a line's worth of rows (each source line then read whole, as the tiles want).
// 0 when that is over unit_max elements, or when a staged operand copies spread (copies_spread).
inline int64_t staged_unit(int64_t unit, int64_t unit_max, std::initializer_list<const TensorView*> staged) {
  if (unit > unit_max || copies_spread(staged)) return 0;
  for (const TensorView* t : staged) {
    if (t == nullptr) continue;
    const FlatIndex f(*t);
    if (!dense_detail::is_transposed_pair(f)) continue;
    const int64_t na = f.shape[f.m - 1], plane = na * f.shape[f.m - 2];
    const int64_t rows = unit / std::gcd(unit, na) * na;  // lcm(unit, na)
    if (rows > unit_max) return 0;
    unit = rows;
    const int64_t strip = na * int64_t(64 / t->itemsize());
    if (plane % unit == 0 && plane <= unit_max) unit = plane;
    else if (strip % unit == 0 && strip <= unit_max) unit = strip;
  }
  return unit;
}

// Elements of a task of `total` in whole units of `unit`: about kStageTaskBytes of an operand of
// `item_bytes`, but at least kStageMinTasks tasks where the units allow (fewer, bigger tasks
// left a thread idle for part of mid-sized calls). 0 when that is a single task although the
// call is worth two threads (`grain` elements each): the whole copies split finer.
inline int64_t staged_task_elems(int64_t total, int64_t unit, uint64_t item_bytes, int64_t grain) {
  const int64_t per_task = std::max<int64_t>(
      1, std::min(int64_t(kStageTaskBytes / item_bytes) / unit, total / unit / kStageMinTasks));
  const int64_t elems = per_task * unit;
  return elems >= total && total >= 2 * grain ? 0 : elems;
}

// Slots (per-thread scratch memory) for `tasks` tasks of slot_bytes each: at most one a thread
// of kStageMaxSlots, and all of them within kStageSlotBudget.
inline int64_t staged_slots(int64_t tasks, uint64_t slot_bytes) {
  return std::min<int64_t>({kStageMaxSlots, tasks, int64_t(std::max<uint64_t>(1, kStageSlotBudget / slot_bytes))});
}

constexpr int kMaxStagedOperands = 4;

// How one call's operands reach the kernel's dense code (see the top of this file). Every
// operand declared has its share of a slot, moving or not, so that a plan's slots depend on the
// operands' shapes and dtypes, not on which of them move.
class Staging {
 public:
  enum Direction : bool { kIn = false, kOut = true };

  Staging() = default;
  explicit Staging(char* at) : at_(at) {}  // the moves' workspace (null: sizes only)

  // Declares the next operand (in slot order; at most kMaxStagedOperands) and returns its index:
  // `view` as the copies read (kIn) or write (kOut) it, e.g. an input broadcast to the others'
  // shape at stride 0.
  int add(const TensorView& view, Direction direction, bool moves) {
    Operand& o = ops_[n_];
    o.view = view;
    o.flat = FlatIndex(view);
    o.out = direction == kOut;
    o.moves = moves;
    return n_++;
  }

  bool moves(int k) const { return ops_[k].moves; }
  bool any() const {
    for (int k = 0; k < n_; ++k)
      if (ops_[k].moves) return true;
    return false;
  }
  const TensorView& given(int k) const { return ops_[k].view; }

  // Plans task staging of `total` elements in tasks of whole `unit`s sized by the shared rules
  // (staged_unit, staged_task_elems with `grain` elements worth a thread); false, planning
  // nothing, when the units do not fit a slot or one task would have to do a call worth two.
  bool plan_tasks(int64_t total, int64_t unit, int64_t grain) {
    uint64_t widest = 0;
    for (int k = 0; k < n_; ++k) widest = std::max<uint64_t>(widest, ops_[k].view.itemsize());
    const TensorView* staged[kMaxStagedOperands] = {};
    for (int k = 0; k < n_; ++k) staged[k] = ops_[k].moves ? &ops_[k].view : nullptr;
    unit = staged_unit(unit, int64_t(kStageUnitMaxBytes / widest), {staged[0], staged[1], staged[2], staged[3]});
    if (unit == 0) return false;
    const int64_t task_elems = staged_task_elems(total, unit, widest, grain);
    if (task_elems == 0) return false;
    lay_out_slots(total, task_elems);
    return true;
  }

  // Plans task staging in the kernel's own tasks of task_elems elements each (GroupNorm's
  // groups); false when a moving operand copies spread (copies_spread: its ranges hold no
  // line-wide run, so it is copied whole).
  bool plan_fixed_tasks(int64_t total, int64_t task_elems) {
    for (int k = 0; k < n_; ++k)
      if (ops_[k].moves && copies_spread({&ops_[k].view})) return false;
    lay_out_slots(total, task_elems);
    return true;
  }

  // Plans whole dense copies of the moving operands, one after another from the workspace.
  void plan_whole() {
    DensePlace place{at_};
    for (int k = 0; k < n_; ++k)
      if (ops_[k].moves) ops_[k].dense = place.take(ops_[k].view).data;
    bytes_ = place.bytes;
    whole_ = true;
  }

  bool staged() const { return task_elems_ > 0; }

  // Operand k as the kernel takes it on whole copies: its dense copy when it moves (shape and
  // strides from its declaration on; the data from plan_whole on), else as declared.
  TensorView view(int k) const { return ops_[k].moves ? dense_view(ops_[k].view, ops_[k].dense) : ops_[k].view; }
  // t = operand k's dense copy when k moves (view); t stays when it does not.
  void use_dense(int k, TensorView& t) const {
    if (ops_[k].moves) t = view(k);
  }

  // Whole copies: the moving inputs into their buffers, the moving outputs back from theirs.
  void copy_in() const {
    for (int k = 0; k < n_ && whole_; ++k)
      if (ops_[k].moves && !ops_[k].out) copy_to_dense(ops_[k].view, ops_[k].dense);
  }
  void copy_out() const {
    for (int k = 0; k < n_ && whole_; ++k)
      if (ops_[k].moves && ops_[k].out) copy_from_dense(ops_[k].dense, ops_[k].view);
  }

  // Bytes of the moves' workspace: the slots, or the whole copies.
  uint64_t bytes() const { return bytes_; }

  // Staged tasks: tasks and their elements, slots and their bytes.
  int64_t tasks() const { return staged() ? (total_ + task_elems_ - 1) / task_elems_ : 0; }
  int64_t task_elems() const { return task_elems_; }
  int64_t slot_count() const { return slots_; }

 private:
  friend struct StagedTask;
  template <class Body>
  friend void run_staged(const Staging& s, Body&& body);

  struct Operand {
    TensorView view;
    FlatIndex flat;
    bool out = false, moves = false;
    void* dense = nullptr;     // whole copies: its buffer
    uint64_t slot_offset = 0;  // staged: its range's place in a slot
  };

  // A slot: each operand's range of a task, rounded up to a line, in declaration order.
  void lay_out_slots(int64_t total, int64_t task_elems) {
    total_ = total;
    task_elems_ = task_elems;
    slot_bytes_ = 0;
    for (int k = 0; k < n_; ++k) {
      ops_[k].slot_offset = slot_bytes_;
      slot_bytes_ += (uint64_t(task_elems) * ops_[k].view.itemsize() + 63) / 64 * 64;
    }
    slots_ = staged_slots(tasks(), slot_bytes_);
    bytes_ = uint64_t(slots_) * slot_bytes_;
  }

  char* at_ = nullptr;
  Operand ops_[kMaxStagedOperands];
  int n_ = 0;
  bool whole_ = false;
  int64_t total_ = 0, task_elems_ = 0, slots_ = 0;
  uint64_t slot_bytes_ = 0, bytes_ = 0;
};

// One task of a staged run: elements [first, first + count) of the call's row-major order, and
// its thread's slot.
struct StagedTask {
  const Staging& s;
  char* slot;
  int64_t first, count;

  bool moves(int k) const { return s.ops_[k].moves; }
  // Input k's range: copied into the slot when it moves, else in place (an operand that does not
  // move is taken as contiguous here; a kernel with other in-place layouts asks moves() first).
  template <class T>
  T* in(int k) const {
    const Staging::Operand& o = s.ops_[k];
    if (!o.moves) return o.view.ptr<T>() + first;
    copy_range_to_dense(o.view, o.flat, first, count, slot + o.slot_offset);
    return reinterpret_cast<T*>(slot + o.slot_offset);
  }
  // Output k's range: its room in the slot when it moves (copied out after the task), else in
  // place (as for in).
  template <class T>
  T* out(int k) const {
    const Staging::Operand& o = s.ops_[k];
    return o.moves ? reinterpret_cast<T*>(slot + o.slot_offset) : o.view.ptr<T>() + first;
  }
  // Operand k's room in the slot, nothing copied (an input the task does not read).
  template <class T>
  T* room(int k) const {
    return reinterpret_cast<T*>(slot + s.ops_[k].slot_offset);
  }
};

// Runs body(task) for each task of a staged plan, on at most its slot count of threads, each task
// in its thread's slot; then copies the task's range of each moving output back. The tasks'
// results never depend on the thread that runs them.
template <class Body>
void run_staged(const Staging& s, Body&& body) {
  parallel_tasks(s.tasks(), s.slots_, [&](int64_t t, int64_t worker) {
    const int64_t first = t * s.task_elems_;
    const StagedTask task{s, s.at_ + worker * s.slot_bytes_, first, std::min(s.task_elems_, s.total_ - first)};
    body(task);
    for (int k = 0; k < s.n_; ++k) {
      const Staging::Operand& o = s.ops_[k];
      if (o.moves && o.out) copy_range_from_dense(task.slot + o.slot_offset, o.view, o.flat, first, task.count);
    }
  });
}

// A call as its kernel runs it: its arguments (dense copies in place of the operands that move
// whole), the kernel's plan of them, the moves, and the workspace: [kernel_bytes of the kernel's
// own scratch][moves.bytes()] (prepare_in places the moves after the kernel's bytes).
template <class Args, class Plan>
struct Prepared {
  Args args;
  Plan plan;
  Staging staging;
  uint64_t kernel_bytes = 0;
  uint64_t bytes() const { return kernel_bytes + staging.bytes(); }
};

// Operands of an elementwise op (or of per-plane sums) that share one layout whose dims from 2
// on are a dense permutation (transposed planes), each replaced by its [d0, d1, P] view with the
// planes in memory order (TensorView::planes_in_memory_order), so that position k of a plane is
// the same element in all of them and the contiguous plane code runs on them in place; false,
// the views untouched, otherwise (rank below 4, contiguous or empty views, layouts that differ).
inline bool to_planes_in_memory_order(std::initializer_list<TensorView*> views) {
  const TensorView& first = **views.begin();
  if (first.ndim < 4 || first.numel() == 0 || first.is_contiguous()) return false;
  TensorView planes[kMaxStagedOperands];
  int k = 0;
  for (TensorView* t : views)
    if (!first.same_layout(*t) || !t->planes_in_memory_order(planes[k++])) return false;
  k = 0;
  for (TensorView* t : views) *t = planes[k++];
  return true;
}

}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
