// Expert parallelism on a skewed routing: every token takes experts 0 and 1,
// which rank 0 owns, so every other rank sends all its rows to rank 0 and
// receives none. --moe-expert-parallel=ranks=N then --moe-split-exchanges, run
// as N ranks simulated on the CPU (test/lib/ep_case.py: one mlir-runner run per
// stage, the exchanges done in numpy as moe.dispatch / moe.undispatch define
// them; unequal token counts, one rank with 1 token and from N = 4 one with
// none), must give each rank's tokens the one-rank layer's output bit for bit
// (f32). N = 1 also runs the unsplit ranks-1 program.
// RUN: %python %testlib/ep_case.py run skewed 1 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N1
// RUN: %python %testlib/ep_case.py run skewed 2 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N2
// RUN: %python %testlib/ep_case.py run skewed 4 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N4
// RUN: %python %testlib/ep_case.py run skewed 8 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N8
// N1: PASS skewed N=1:
// N2: PASS skewed N=2:
// N4: PASS skewed N=4:
// N8: PASS skewed N=8:
