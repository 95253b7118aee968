// Expert parallelism on DeepSeek-V3 routing (sigmoid, correction bias, 4 groups
// select 2, renormalised, scale 2.5; E = 16, top 4). --moe-expert-
// parallel=ranks=N then --moe-split-exchanges, run as N ranks simulated on the
// CPU (test/lib/ep_case.py: one mlir-runner run per stage, the exchanges done
// in numpy as moe.dispatch / moe.undispatch define them; unequal token counts,
// one rank with 1 token and from N = 4 one with none), must give each rank's
// tokens the one-rank layer's output bit for bit (f32). N = 1 also runs the
// unsplit ranks-1 program.
// RUN: %python %testlib/ep_case.py run deepseek 1 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N1
// RUN: %python %testlib/ep_case.py run deepseek 2 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N2
// RUN: %python %testlib/ep_case.py run deepseek 4 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N4
// RUN: %python %testlib/ep_case.py run deepseek 8 --moe-opt moe-opt --runner '%mlir-runner' | FileCheck %s --check-prefix=N8
// N1: PASS deepseek N=1:
// N2: PASS deepseek N=2:
// N4: PASS deepseek N=4:
// N8: PASS deepseek N=8:
