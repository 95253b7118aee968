// A tiny Mixtral-style MoE layer (H = 8, I = 8, E = 4 experts, top-2 with
// renormalisation, SwiGLU experts) for a dynamic token count, and a main that
// runs it on 3 tokens with deterministic inputs and prints the output [3, 8].
//
//   moe-opt examples/mixtral_tiny.mlir --moe-cpu-reference-pipeline \
//     | mlir-runner -e main -entry-point-result=void \
//         -shared-libs=/usr/lib/llvm-22/lib/libmlir_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so
//
// examples/check_example.py recomputes the output with the numpy reference.

func.func @moe_layer(%x: tensor<?x8xf32>, %logits: tensor<?x4xf32>,
                     %w13: tensor<4x16x8xf32>, %w2: tensor<4x8x8xf32>) -> tensor<?x8xf32> {
  %ids, %weights = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  %rows, %offsets, %slots = moe.permute %x, %ids
      : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x8xf32>, tensor<5xi64>, tensor<?x2xi64>)
  %gate_up = moe.grouped_matmul %rows, %w13, %offsets
      : (tensor<?x8xf32>, tensor<4x16x8xf32>, tensor<5xi64>) -> tensor<?x16xf32>
  %act = moe.swiglu silu %gate_up : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %down = moe.grouped_matmul %act, %w2, %offsets
      : (tensor<?x8xf32>, tensor<4x8x8xf32>, tensor<5xi64>) -> tensor<?x8xf32>
  %y = moe.unpermute %down, %slots weights %weights
      : (tensor<?x8xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// Deterministic inputs: element [i, j] = amp * sin(a*i + b*j + c), in f32.
func.func @wave2d(%init: tensor<?x?xf32>, %amp: f32, %a: f32, %b: f32, %c: f32) -> tensor<?x?xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} outs(%init : tensor<?x?xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %fi = arith.uitofp %ii : i32 to f32
    %fj = arith.uitofp %jj : i32 to f32
    %ai = arith.mulf %a, %fi : f32
    %bj = arith.mulf %b, %fj : f32
    %sum = arith.addf %ai, %bj : f32
    %s = arith.addf %sum, %c : f32
    %sin = math.sin %s : f32
    %v = arith.mulf %amp, %sin : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %c3 = arith.constant 3 : index
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %w_amp = arith.constant 0.35 : f32
  %p1 = arith.constant 0.7 : f32
  %p2 = arith.constant 1.3 : f32
  %p3 = arith.constant 0.1 : f32
  %p4 = arith.constant 2.3 : f32
  %p5 = arith.constant 0.5 : f32
  %p6 = arith.constant 0.53 : f32
  %p7 = arith.constant 0.71 : f32
  %p8 = arith.constant 0.29 : f32
  %x0 = tensor.empty(%c3) : tensor<?x8xf32>
  %xd = tensor.cast %x0 : tensor<?x8xf32> to tensor<?x?xf32>
  %xw = func.call @wave2d(%xd, %one, %p1, %p2, %p3) : (tensor<?x?xf32>, f32, f32, f32, f32) -> tensor<?x?xf32>
  %x = tensor.cast %xw : tensor<?x?xf32> to tensor<?x8xf32>
  %l0 = tensor.empty(%c3) : tensor<?x4xf32>
  %ld = tensor.cast %l0 : tensor<?x4xf32> to tensor<?x?xf32>
  %lw = func.call @wave2d(%ld, %two, %p2, %p4, %p5) : (tensor<?x?xf32>, f32, f32, f32, f32) -> tensor<?x?xf32>
  %logits = tensor.cast %lw : tensor<?x?xf32> to tensor<?x4xf32>
  // Expert weights: row (e, n) of the flattened [E*N, K] view.
  %a0 = tensor.empty() : tensor<64x8xf32>
  %ad = tensor.cast %a0 : tensor<64x8xf32> to tensor<?x?xf32>
  %aw = func.call @wave2d(%ad, %w_amp, %p6, %p7, %p3) : (tensor<?x?xf32>, f32, f32, f32, f32) -> tensor<?x?xf32>
  %a2 = tensor.cast %aw : tensor<?x?xf32> to tensor<64x8xf32>
  %w13 = tensor.expand_shape %a2 [[0, 1], [2]] output_shape [4, 16, 8] : tensor<64x8xf32> into tensor<4x16x8xf32>
  %b0 = tensor.empty() : tensor<32x8xf32>
  %bd = tensor.cast %b0 : tensor<32x8xf32> to tensor<?x?xf32>
  %bw = func.call @wave2d(%bd, %w_amp, %p8, %p5, %p5) : (tensor<?x?xf32>, f32, f32, f32, f32) -> tensor<?x?xf32>
  %b2 = tensor.cast %bw : tensor<?x?xf32> to tensor<32x8xf32>
  %w2 = tensor.expand_shape %b2 [[0, 1], [2]] output_shape [4, 8, 8] : tensor<32x8xf32> into tensor<4x8x8xf32>

  %y = func.call @moe_layer(%x, %logits, %w13, %w2)
      : (tensor<?x8xf32>, tensor<?x4xf32>, tensor<4x16x8xf32>, tensor<4x8x8xf32>) -> tensor<?x8xf32>
  %u = tensor.cast %y : tensor<?x8xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
