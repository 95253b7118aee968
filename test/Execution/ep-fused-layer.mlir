// Expert parallelism on the fused expert MLP (moe.expert_mlp) inside a
// moe.layer (E = 4, so N <= 4). --moe-expert-parallel=ranks=N then --moe-split-
// exchanges, run as N ranks simulated on the CPU (test/lib/ep_case.py: one
// mlir-runner run per stage, the exchanges done in numpy as moe.dispatch /
// moe.undispatch define them; unequal token counts, one rank with 1 token and
// from N = 4 one with none), must give each rank's tokens the one-rank layer's
// output bit for bit (f32). N = 1 also runs the unsplit ranks-1 program.
// RUN: %python %testlib/ep_case.py run fused-layer 1 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N1
// RUN: %python %testlib/ep_case.py run fused-layer 2 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N2
// RUN: %python %testlib/ep_case.py run fused-layer 4 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N4
// N1: PASS fused-layer N=1:
// N2: PASS fused-layer N=2:
// N4: PASS fused-layer N=4:
