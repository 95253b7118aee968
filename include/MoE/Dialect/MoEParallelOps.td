//===- MoEParallelOps.td - moe expert-parallel operations --*- tablegen -*-===//
//
// The exchanges of an expert-parallel layer, as --moe-expert-parallel writes
// it: rows to the ranks owning their experts and back. Collectives: each
// op's result depends on every rank's operands, so the ops have side effects
// (never erased, merged or moved). Included by MoEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_MOEPARALLELOPS_TD
#define MOE_DIALECT_MOEPARALLELOPS_TD

def MoE_DispatchOp : MoE_Op<"dispatch"> {
  let summary = "expert parallelism: send each expert row to the rank that "
                "owns its expert";
  let description = [{
    A collective over `ranks` N ranks, each running the same program. The E
    experts are split evenly: rank d owns experts `[d*L, (d+1)*L)`, L = E/N
    (E is the size of `offsets` minus one). Every rank holds its rows
    grouped by expert, as `moe.permute` makes them, and:

    - sends rows `[offsets[d*L], offsets[(d+1)*L])` (clamped as
      `moe.grouped_matmul` reads offsets) to rank d, in order, each with its
      expert's id local to rank d (`e - d*L`);
    - receives, from each rank s = 0 .. N-1 in turn, what s sent to it:
      `received` is their concatenation `[R, H]`, `local_ids` (`[R, 1]`,
      i32) the local expert of each received row, and `counts` (`[N]`,
      i64) how many rows came from each rank (exchanged before the rows).

    Rows past `offsets[E]` (dropped ids' zeros) are not sent. With one rank
    the op keeps rows `[0, offsets[E])` and gives each its expert. The
    received rows go through `moe.permute` by `local_ids` to the rank's
    experts; `moe.undispatch` with the same `counts` and `offsets` sends the
    results back.

    ```mlir
    %recv, %ids, %counts = moe.dispatch %rows, %offsets ranks 8
        : (tensor<?x7168xbf16>, tensor<257xi64>)
        -> (tensor<?x7168xbf16>, tensor<?x1xi32>, tensor<8xi64>)
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$rows, MoE_IndexTensor:$offsets,
                       I64Attr:$ranks);
  let results = (outs MoE_FloatTensor:$received, MoE_I32Tensor:$local_ids,
                      MoE_IndexTensor:$counts);
  let assemblyFormat = [{
    $rows `,` $offsets `ranks` $ranks attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_UndispatchOp : MoE_Op<"undispatch"> {
  let summary = "expert parallelism: send the experts' output rows back to "
                "the ranks they came from";
  let description = [{
    The reverse of `moe.dispatch` with the same `counts` (rows received from
    each rank) and `offsets` (this rank's rows by expert), over the same
    `ranks`: `rows` (`[R, H]`, in the order `moe.dispatch` received them)
    are split by `counts` and each part goes back to its rank; the result
    (`[offsets[E], H]`) holds, at `[offsets[d*L], offsets[(d+1)*L])`, what
    rank d returned for the rows this rank sent it. `moe.unpermute` with the
    permute's slots and routing weights then sums each token's rows where
    the token lives.

    ```mlir
    %back = moe.undispatch %out, %counts, %offsets ranks 8
        : (tensor<?x7168xbf16>, tensor<8xi64>, tensor<257xi64>)
        -> tensor<?x7168xbf16>
    ```
  }];
  let arguments = (ins MoE_FloatTensor:$rows, MoE_IndexTensor:$counts,
                       MoE_IndexTensor:$offsets, I64Attr:$ranks);
  let results = (outs MoE_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $counts `,` $offsets `ranks` $ranks attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MOE_DIALECT_MOEPARALLELOPS_TD
