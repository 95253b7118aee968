// Runs each raised fixture on the CPU (--moe-cpu-reference-pipeline,
// mlir-runner) on the input export_fixtures.py recorded, and compares the
// layer output with what the torch module computed in eager mode: the
// raise computes what the exported program does.
//
// RUN: moe-opt %S/raise/fixtures/mixtral_dense_masked.mlir --allow-unregistered-dialect --moe-raise -o %t.mixtral.mlir
// RUN: %python %S/raise/run_fixture.py driver mixtral_dense_masked %S/raise/fixtures/mixtral_dense_masked.io.txt %t.mixtral.mlir \
// RUN:   | moe-opt --moe-cpu-reference-pipeline | %mlir-runner > %t.mixtral.out
// RUN: %python %S/raise/run_fixture.py check %S/raise/fixtures/mixtral_dense_masked.io.txt %t.mixtral.out | FileCheck %s
//
// RUN: moe-opt %S/raise/fixtures/qwen3_dense_masked.mlir --allow-unregistered-dialect --moe-raise -o %t.qwen3.mlir
// RUN: %python %S/raise/run_fixture.py driver qwen3_dense_masked %S/raise/fixtures/qwen3_dense_masked.io.txt %t.qwen3.mlir \
// RUN:   | moe-opt --moe-cpu-reference-pipeline | %mlir-runner > %t.qwen3.out
// RUN: %python %S/raise/run_fixture.py check %S/raise/fixtures/qwen3_dense_masked.io.txt %t.qwen3.out | FileCheck %s
//
// RUN: moe-opt %S/raise/fixtures/qwen3_stacked_gather.mlir --allow-unregistered-dialect --moe-raise -o %t.gather.mlir
// RUN: %python %S/raise/run_fixture.py driver qwen3_stacked_gather %S/raise/fixtures/qwen3_stacked_gather.io.txt %t.gather.mlir \
// RUN:   | moe-opt --moe-cpu-reference-pipeline | %mlir-runner > %t.gather.out
// RUN: %python %S/raise/run_fixture.py check %S/raise/fixtures/qwen3_stacked_gather.io.txt %t.gather.out | FileCheck %s

// CHECK: PASS: rel L2 {{.*}} against torch
