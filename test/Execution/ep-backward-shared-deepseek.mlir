// The backward of expert parallelism on DeepSeek-V3 routing (sigmoid,
// correction bias, groups, scale) with a shared expert on the combine, which
// stays replicated: each rank runs it on its own tokens.
// --moe-expert-parallel=ranks=N --moe-generate-backward --moe-split-exchanges,
// run as N ranks simulated on the CPU (test/lib/ep_case.py run --backward:
// @layer_train_stage0.. then @layer_backward_stage0.. on every rank, the
// exchanges between stages done in numpy as the stages' attributes name them;
// unequal token counts, one rank with 1 token and from N = 4 one with none;
// a seeded dy), must give bit for bit (f32) what the one-rank layer's train
// and backward (--moe-generate-backward, itself within 1e-5 of
// test/lib/moe_grad_ref.py) give: y, dx and dlogits on each rank's tokens,
// and each rank's expert gradients equal to its slice [r*L, (r+1)*L) of the
// one-rank ones. The backward's dispatch must send the row gradients in the
// forward's layout and its undispatch return them to the ranks that sent the
// rows.
// The shared expert's weight gradients dsw13 and dsw2 are each rank's own
// tokens' part: their sum over the ranks must be within 1e-5 (relative L2) of
// the one-rank gradients, not bit-equal (the sum over tokens restarts at each
// rank's first token; the PASS line counts the f32 sums that are bit-equal).
// Everything else, dx with the shared path's part, is bit-exact.
// RUN: %python %testlib/ep_case.py run shared-deepseek 2 --backward --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N2
// RUN: %python %testlib/ep_case.py run shared-deepseek 4 --backward --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N4
// N2: PASS shared-deepseek N=2 backward:
// N4: PASS shared-deepseek N=4 backward:
