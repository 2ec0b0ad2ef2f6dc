// GridSampler2DBackward: the modes, and the constants that size and steer the work.
// A part of the kernel ops/grid_sampler2d_backward.cpp, compiled inside it once per ISA level
// (hence the ISA namespace and the anonymous namespace); the forward kernel ops/grid_sampler2d.cpp
// includes it too, and nothing else.
#pragma once

#include <cstdint>

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

enum Interpolation : int { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int { kZeros = 0, kBorder = 1, kReflection = 2 };

constexpr int64_t kAlign = 64;                  // byte alignment of every workspace region
constexpr int64_t kTile = 256;                  // positions per gradOutput tile
constexpr int64_t kTileRecordBytes = (kTile * 4 + kAlign - 1) / kAlign * kAlign;  // one array of a tile's records
// Workspace budgets. Python's functional API allocates the workspace on every call, and glibc
// serves blocks up to 32 MiB from its heap (reused, already mapped) but maps bigger ones afresh
// (every touched page faults again): typical calls should stay well below that.
constexpr int64_t kRecordBudget = 8 << 20;      // bytes of records + partials per sample chunk
// (Scratch slots follow the shared rule of include/aclnn_cpu/staging.h: at most kStageMaxSlots,
// all within kStageSlotBudget bytes; staged_slots.)
// Below this many (sample, channel block) pairs, each one's positions are split into parts
// (Runner::run_split): parts give idle threads work but cost their buffers' zeroing, bounding
// and reduction. 8 split 4-7 pairs too; 4, in-process A/B at 2 threads over two runs (bitwise
// different but fixed by the shape, as before): N4 C3 224x224 0.82-0.88x the time in all three
// modes, N4 C8 128x128 0.92x, N6 C3 bicubic 0.89x, N5 C1 nearest 0.90x, N5 and N7 C3 bilinear
// 0.94-1.08x, N4 C16 64x64 and N2 C32 1.00-1.05x. In a slow spell of the machine (the noise of
// docs/performance.md, "Method") the split runs were hit hardest: 0.44-0.53x the time unsplit.
constexpr int64_t kTargetTasks = 4;
constexpr int64_t kMinPartPositions = 1024;     // fewest positions worth a part of their own
constexpr int64_t kSlotChunk = 64;              // compact slots moved a channel at a time, where they alias
constexpr int64_t kPositionGrain = 2048;        // phase 1 / 3 positions per thread, at least
// Phase 2 work worth a second thread: about 20 us on one thread, in units of task_cost().
constexpr int64_t kTaskGrainWork = 1 << 16;
constexpr int64_t kSampleTasksPerThread = 4;  // nearest: whole-sample tasks from this many samples a thread
constexpr int64_t kTileRecordBlocks = 8;       // most channel blocks computing bilinear records per tile
constexpr int64_t kPrefetch = 8;                // positions ahead whose pixel rows are prefetched
constexpr int64_t kNearestNoPrefetchBytes = 256 << 10;  // nearest: buffers up to this size are not prefetched
constexpr int64_t kBilinearNoPrefetchBytes = 1 << 20;  // bilinear, 4 or 8 lanes on AVX-512: the same
// Positions reaching this many times fewer pixels than the input has (taps * P + 1 <= H * W /
// kCompactRatio, bilinear and nearest): phase 2 works on the referenced pixels only
// (Runner::run_compact). Against the full buffers, in-process A/B, 2 threads, fp32 and bf16:
// at a ratio of 12.6-34 0.24-0.89x the time (N8 C64 56x56 -> 7x7 bilinear, at 15.9: 0.24-0.28x),
// at 8.5 0.79-1.08x, at 4-4.5 1.03-2.35x. Bicubic grids have their own ratio (kFewBicubicRatio).
constexpr int64_t kCompactRatio = 12;
// ... and from a ratio of 6 when a block's input and inputGrad planes take at most 512 KiB (half
// this machine's L2): the compact path's gathers from the input planes and scatters into the
// inputGrad planes then hit the cache. Processes alternated, 2 threads, fp32, against 12: N1 C9
// 165x31 -> 154x1 bilinear (ratio 8.3) 28-35 -> 13.4 us (torch 20), N2 C9 35x82 -> 2x40 (8.9)
// 25-26 -> 14 us (torch 19-20); at a ratio of 4 N4 C8 64x64 -> 30x30 nearest took 1.1x the time.
// Bigger planes keep 12: N10 C16 149x272 -> 2x703 (7.2, 2.6 MB of planes a block) 1.6-1.8 ->
// 2.9-3.2 ms at 6.
constexpr int64_t kCompactCachedRatio = 6;
constexpr int64_t kCompactCachedBytes = 512 << 10;
// ... and from a ratio of 6 on planes of any size when the call has at most 2 (sample, block)
// pairs: a thread then carries a whole pair's full buffers, most of which the grid never
// touches. Processes alternated, 2 threads, fp32, against 12 (torch in brackets): N1 C16
// 256x256 -> 40x40 bilinear (ratio 10.2) 544-621 -> 276 us (246-305), N1 C32 200x200 -> 30x30
// border (11.1) 299-349 -> 135-193 us (351-367), N1 C12 269x80 -> 56x11 (8.7) 105 -> 57-60 us
// (74-78), N2 C9 200x150 -> 18x39 (10.7) 139-142 -> 68-93 us (124-167), N1 C5 128x256 ->
// 56x57 nearest (10.3) 59-74 -> 37 us (39-56). With more pairs 12 stays: at 6, N4 C16 256x256
// -> 40x40 took 2.1-2.3 -> 3.0-3.3 ms, N10 C16 149x272 -> 2x703 1.9-2.2 -> 2.7-2.8 ms, N8 C20
// 128x128 -> 24x24 0.54-0.61 -> 0.82-0.98 ms, N8 C32 96x96 -> 12x12 nearest 96-101 -> 173-192 us.
constexpr int64_t kCompactFewTasks = 2;
// Bicubic grids whose taps reach at most 1/kFewBicubicRatio of the pixels (16 * P *
// kFewBicubicRatio <= H * W) run on their tap grid or pixel slots (Plan::few_bicubic). Once
// gather_slots and scatter_slots stopped thrashing one cache set on power-of-two planes, 6 beat
// 12 on every shape measured between the two: processes alternated, 2 threads, fp32, ratio 7-10,
// N1 C9 269x80 -> 13x11 border 97 -> 60 us (torch 65-78), C16 128x128 -> 12x12 121 -> 78-89 us,
// C16 64x64 -> 6x6 31 -> 20 us, C32 128x128 -> 12x12 125 -> 82 us, C12 200x150 -> 14x14 141-145
// -> 75-77 us, N8 C16 64x64 -> 5x6 114-126 -> 70 us, N2 C16 96x96 -> 8x8 71-84 -> 54 us, N1 C5
// 256x256 -> 20x20 160 -> 104 us; bf16 and fp16 0.6-1.0x the time (fp16 once the scalar
// conversions took F16C). At a ratio of 3-4 the full buffers won again (N2 C16 96x96 -> 12x12
// border 81-90 us against 111-130).
constexpr int64_t kFewBicubicRatio = 6;
// Grids of at most 1/kWindowRatio as many positions as the input has pixels: one-task-per-block
// calls (Runner::run_fused) load, zero and write back only the input rows they can reach.
constexpr int64_t kWindowRatio = 8;
// Up to 4 channels (one block) whose taps reach at most 1/kDirectRatio of the input's pixels
// (taps * P * kDirectRatio <= H * W, bilinear and nearest) run on their planes directly
// (Runner::run_direct) instead of the compact, windowed or full-buffer paths. In-process A/B,
// 2 threads, fp32, random grids: at a ratio of 6, 128x128 planes 0.40-0.64x the time (N8 C1-C4
// -> 26x26 bilinear; nearest C3-C4 -> 52x52 0.60-0.71x), 512x512 planes with prefetches
// (Plan::direct_prefetch) 0.74-0.93x, C4 1.0x; at 8.5 0.27-0.68x; N10 C2 149x272 -> 2x703
// (7.2) 220 -> 113 us (torch 135); at 4 0.65-1.22x (C4 1.22x), at 2 0.89-1.69x.
constexpr int64_t kDirectRatio = 6;
// With 16-bit inputGrad, the direct path's fp32 planes cost 8 C - 4 bytes a pixel more than the
// compact path: the compact path is kept where it applies and taps * P * kDirectSlotRatio <
// (2 C - 1) * H * W (bf16, in-process A/B, 2 threads: N8 C3 128x128 -> 8x8 1.22x the time
// direct, 11x11 0.86x; N2 C3 256x256 -> 16x16 1.32x, 32x32 0.76x; C1 -> 8x8 0.78x).
constexpr int64_t kDirectSlotRatio = 256;
// Tasks fewer than the threads, which zero-fill their inputGrad planes: from kZeroFillFirstBytes
// of them a chunk, all threads zero-fill them first (Runner::zero_fill_first), in pieces of
// kZeroFillGrain elements, when they take kZeroFillFirstUncachedBytes or more (beyond one core's
// L2) or taps * P * kZeroFillFirstRatio <= H * W. N1, 2 threads, fp32, processes alternated:
// C1 2048x2048 -> 64x64 bilinear (direct) 280-310 -> 183-187 us (torch 200-360), 1024x1024
// 85 -> 70 (torch 78-82); C1 512x512 -> 20x20 nearest 15 -> 11 (torch 13.5); C16 96x174 -> 6x3
// bilinear (compact) 17.6 -> 12.2 (torch 14.5). Cached planes whose taps reach many lines lost:
// C3 256x256 -> 16x16 bicubic 37 -> 50 us, C1 512x512 -> 64x64 bilinear 50 -> 54 (ratio 16).
constexpr int64_t kZeroFillFirstBytes = 256 << 10;
constexpr int64_t kZeroFillFirstUncachedBytes = 2 << 20;
constexpr int64_t kZeroFillFirstRatio = 128;
constexpr int64_t kZeroFillGrain = 16 << 10;
constexpr double kCubicA = -0.75;
// A bicubic tile's record arrays: 24 fields (lay_out_records), then 16 of pixel slots that only
// run_bicubic_pixels fills.
constexpr int kBicubicRecordFields = 24;
constexpr int kBicubicTileArrays = kBicubicRecordFields + 16;

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
int64_t ceil_div(int64_t x, int64_t a) { return (x + a - 1) / a; }

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
