// moe.unpermute_grad with a dynamic k (slots ?x?): every pair's row gets its
// token's gradient (a k read as a constant once ran no pair at all).
// RUN: moe-opt %s --moe-cpu-reference-pipeline | %mlir-runner | FileCheck %s
// CHECK: [1,   2,   3,   4],
// CHECK-NEXT: [1,   2,   3,   4],
// CHECK-NEXT: [5,   6,   7,   8],
// CHECK-NEXT: [5,   6,   7,   8]]
func.func @main() {
  %g = arith.constant dense<[[1.0,2.0,3.0,4.0],[5.0,6.0,7.0,8.0]]> : tensor<2x4xf32>
  %r = arith.constant dense<1.0> : tensor<4x4xf32>
  %s = arith.constant dense<[[0,1],[2,3]]> : tensor<2x2xi64>
  %gd = tensor.cast %g : tensor<2x4xf32> to tensor<?x4xf32>
  %rd = tensor.cast %r : tensor<4x4xf32> to tensor<?x4xf32>
  %sd = tensor.cast %s : tensor<2x2xi64> to tensor<?x?xi64>
  %d = moe.unpermute_grad %gd, %rd, %sd : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x?xi64>) -> tensor<?x4xf32>
  %u = tensor.cast %d : tensor<?x4xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
func.func private @printMemrefF32(tensor<*xf32>)
