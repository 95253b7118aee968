//===- Exchange.cpp - moe.dispatch / moe.undispatch through NCCL ----------===//
//
// The exchanges between the stage entries of an expert-parallel layer
// (docs/expert-parallel.md). The host computes each rank's send layout from
// the offsets (copied to it), NCCL moves the per-(rank, local expert) counts
// and then the rows in one group of point-to-point calls each, and the
// receiver's local expert ids come from the received counts. NCCL's host API
// needs host sizes, hence the synchronisations.
//
//===----------------------------------------------------------------------===//

#include "moe_runtime.h"

#include "Bundle.h"
#include "Loaded.h"
#include "NcclAPI.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace moe::runtime;

struct moeExchange {
  const Driver *driver;
  const Nccl *nccl;
  nccl::Comm comm;
  int ranks = 1, rank = 0;
  int64_t experts = 0, local = 0;
  /// The last moeDispatchCounts: rows this rank sends each rank (and from
  /// where), and receives from each rank per local expert.
  std::vector<int64_t> sendStart, sendCount, received;
};

namespace {

moeStatus ncclError(const Nccl *nccl, const char *caller, const char *call,
                    nccl::Result result) {
  const char *text = nccl->getErrorString ? nccl->getErrorString(result) : "";
  return setError(MOE_STATUS_CUDA_ERROR, "%s: %s failed: ncclResult_t %d (%s)",
                  caller, call, result, text ? text : "");
}

/// The driver and NCCL, or UNSUPPORTED saying which is missing.
moeStatus libraries(const char *caller, const Driver **driver,
                    const Nccl **nccl) {
  std::string whyNot;
  if (!(*driver = getDriver(whyNot)))
    return setError(MOE_STATUS_NO_GPU, "%s: %s", caller, whyNot.c_str());
  if (!(*driver)->memcpyDtoHAsync || !(*driver)->memcpyHtoDAsync ||
      !(*driver)->streamSynchronize)
    return setError(MOE_STATUS_UNSUPPORTED,
                    "%s: the CUDA driver lacks cuMemcpyDtoHAsync_v2, "
                    "cuMemcpyHtoDAsync_v2 or cuStreamSynchronize",
                    caller);
  if (!(*nccl = getNccl(whyNot)))
    return setError(MOE_STATUS_UNSUPPORTED, "%s: %s", caller, whyNot.c_str());
  return MOE_STATUS_SUCCESS;
}

/// Copies `bytes` from the device to `host` on `stream` and waits for it.
moeStatus toHost(const Driver *driver, const char *caller, const char *what,
                 void *host, uint64_t device, size_t bytes, cu::Stream stream) {
  if (cu::Result result = driver->memcpyDtoHAsync(host, device, bytes, stream))
    return driverError(driver, caller,
                       std::string("cuMemcpyDtoHAsync(") + what + ")", result);
  if (cu::Result result = driver->streamSynchronize(stream))
    return driverError(driver, caller, "cuStreamSynchronize", result);
  return MOE_STATUS_SUCCESS;
}

moeStatus toDevice(const Driver *driver, const char *caller, const char *what,
                   uint64_t device, const void *host, size_t bytes,
                   cu::Stream stream) {
  if (bytes == 0)
    return MOE_STATUS_SUCCESS;
  if (cu::Result result = driver->memcpyHtoDAsync(device, host, bytes, stream))
    return driverError(driver, caller,
                       std::string("cuMemcpyHtoDAsync(") + what + ")", result);
  return MOE_STATUS_SUCCESS;
}

/// The offsets (E + 1) on the host, clamped as moe.grouped_matmul reads
/// them: each in [previous, rows].
moeStatus readOffsets(moeExchange *x, const char *caller, uint64_t offsets,
                      int32_t bits, int64_t rows, cu::Stream stream,
                      std::vector<int64_t> &out) {
  if (bits != 32 && bits != 64)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: offsets_bits must be 32 or 64, got %d", caller, bits);
  if (!offsets)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: offsets is NULL", caller);
  size_t n = size_t(x->experts) + 1;
  out.assign(n, 0);
  std::vector<int32_t> narrow(bits == 32 ? n : 0);
  void *host = bits == 32 ? static_cast<void *>(narrow.data()) : out.data();
  if (moeStatus status = toHost(x->driver, caller, "offsets", host, offsets,
                                n * size_t(bits / 8), stream))
    return status;
  int64_t end = 0;
  for (size_t e = 0; e < n; ++e) {
    int64_t v = bits == 32 ? narrow[e] : out[e];
    end = v < end ? end : v > rows ? rows : v;
    out[e] = end;
  }
  out[0] = 0;
  return MOE_STATUS_SUCCESS;
}

/// One NCCL group: for each peer p, a send of sendCount[p] units of `unit`
/// bytes from unit sendAt[p] of `send`, and a receive of recvCount[p] units
/// into unit recvAt[p] of `recv` (none where the count is 0: both sides
/// know it is). NCCL moves them as bytes: send and receive do no arithmetic.
moeStatus exchangeGroup(moeExchange *x, const char *caller, size_t unit,
                        uint64_t send, const std::vector<int64_t> &sendAt,
                        const std::vector<int64_t> &sendCount, uint64_t recv,
                        const std::vector<int64_t> &recvAt,
                        const std::vector<int64_t> &recvCount,
                        cu::Stream stream) {
  const Nccl *nccl = x->nccl;
  if (nccl::Result result = nccl->groupStart())
    return ncclError(nccl, caller, "ncclGroupStart", result);
  nccl::Result failed = nccl::kSuccess;
  const char *what = "";
  for (int p = 0; p < x->ranks && !failed; ++p) {
    if (sendCount[p] > 0 &&
        (failed = nccl->send(
             reinterpret_cast<const void *>(send + sendAt[p] * unit),
             size_t(sendCount[p]) * unit, nccl::kInt8, p, x->comm, stream)))
      what = "ncclSend";
    if (!failed && recvCount[p] > 0 &&
        (failed = nccl->recv(reinterpret_cast<void *>(recv + recvAt[p] * unit),
                             size_t(recvCount[p]) * unit, nccl::kInt8, p,
                             x->comm, stream)))
      what = "ncclRecv";
  }
  nccl::Result ended = nccl->groupEnd();
  if (failed)
    return ncclError(nccl, caller, what, failed);
  if (ended)
    return ncclError(nccl, caller, "ncclGroupEnd", ended);
  return MOE_STATUS_SUCCESS;
}

moeStatus checkExchange(const moeExchange *x, const char *caller) {
  if (!x)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: exchange is NULL",
                    caller);
  return MOE_STATUS_SUCCESS;
}

} // namespace

extern "C" {

MOE_API moeStatus moeExchangeCreate(void *commHandle, int64_t experts,
                                    moeExchange **out) {
  const char *caller = "moeExchangeCreate";
  if (!out)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: out is NULL", caller);
  *out = nullptr;
  if (!commHandle)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: nccl_comm is NULL (an ncclComm_t is needed)", caller);
  if (experts < 1)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: experts must be at least 1, got %lld", caller,
                    static_cast<long long>(experts));
  const Driver *driver;
  const Nccl *nccl;
  if (moeStatus status = libraries(caller, &driver, &nccl))
    return status;
  auto comm = static_cast<nccl::Comm>(commHandle);
  int ranks = 0, rank = 0;
  if (nccl::Result result = nccl->commCount(comm, &ranks))
    return ncclError(nccl, caller, "ncclCommCount", result);
  if (nccl::Result result = nccl->commUserRank(comm, &rank))
    return ncclError(nccl, caller, "ncclCommUserRank", result);
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: the communicator says rank %d of %d", caller, rank,
                    ranks);
  if (experts % ranks)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: %lld experts cannot be split evenly over %d ranks",
                    caller, static_cast<long long>(experts), ranks);
  auto *x = new moeExchange;
  x->driver = driver;
  x->nccl = nccl;
  x->comm = comm;
  x->ranks = ranks;
  x->rank = rank;
  x->experts = experts;
  x->local = experts / ranks;
  *out = x;
  return MOE_STATUS_SUCCESS;
}

MOE_API void moeExchangeDestroy(moeExchange *exchange) { delete exchange; }

MOE_API moeStatus moeExchangeGetRanks(const moeExchange *x, int32_t *ranks,
                                      int32_t *rank) {
  if (moeStatus status = checkExchange(x, "moeExchangeGetRanks"))
    return status;
  if (ranks)
    *ranks = x->ranks;
  if (rank)
    *rank = x->rank;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeExchangeWorkspaceBytes(const moeExchange *x,
                                            uint64_t *bytes) {
  if (moeStatus status = checkExchange(x, "moeExchangeWorkspaceBytes"))
    return status;
  if (!bytes)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "moeExchangeWorkspaceBytes: bytes is NULL");
  *bytes = uint64_t(2 * x->experts) * sizeof(int64_t);
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeDispatchCounts(moeExchange *x, uint64_t offsets,
                                    int32_t offsetsBits, int64_t rows,
                                    uint64_t counts, uint64_t workspace,
                                    int64_t *sent, int64_t *received,
                                    void *streamHandle) {
  const char *caller = "moeDispatchCounts";
  if (moeStatus status = checkExchange(x, caller))
    return status;
  if (rows < 0 || !counts || !workspace || workspace % 8 || !sent || !received)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: rows must be at least 0 and counts, workspace "
                    "(8-aligned), sent and received non-null",
                    caller);
  auto stream = static_cast<cu::Stream>(streamHandle);
  std::vector<int64_t> bounds;
  if (moeStatus status =
          readOffsets(x, caller, offsets, offsetsBits, rows, stream, bounds))
    return status;
  // Rows per (destination, local expert), then what each rank sends us.
  int N = x->ranks;
  int64_t L = x->local;
  std::vector<int64_t> perExpert(size_t(x->experts));
  for (int64_t e = 0; e < x->experts; ++e)
    perExpert[e] = bounds[e + 1] - bounds[e];
  std::vector<int64_t> at(N), len(N, L);
  for (int p = 0; p < N; ++p)
    at[p] = p * L;
  uint64_t sendCounts = workspace,
           recvCounts = workspace + uint64_t(x->experts) * 8;
  if (moeStatus status =
          toDevice(x->driver, caller, "counts sent", sendCounts,
                   perExpert.data(), perExpert.size() * 8, stream))
    return status;
  if (moeStatus status = exchangeGroup(x, caller, sizeof(int64_t), sendCounts,
                                       at, len, recvCounts, at, len, stream))
    return status;
  x->received.assign(size_t(x->experts), 0);
  if (moeStatus status =
          toHost(x->driver, caller, "counts received", x->received.data(),
                 recvCounts, x->received.size() * 8, stream))
    return status;
  std::vector<int64_t> fromRank(N, 0);
  int64_t total = 0;
  for (int s = 0; s < N; ++s) {
    for (int64_t l = 0; l < L; ++l) {
      int64_t c = x->received[s * L + l];
      if (c < 0)
        return setError(MOE_STATUS_CUDA_ERROR,
                        "%s: rank %d says it sends %lld rows of local expert "
                        "%lld",
                        caller, s, static_cast<long long>(c),
                        static_cast<long long>(l));
      fromRank[s] += c;
    }
    total += fromRank[s];
  }
  x->sendStart.assign(N, 0);
  x->sendCount.assign(N, 0);
  for (int d = 0; d < N; ++d) {
    x->sendStart[d] = bounds[d * L];
    x->sendCount[d] = bounds[(d + 1) * L] - bounds[d * L];
  }
  if (moeStatus status = toDevice(x->driver, caller, "counts", counts,
                                  fromRank.data(), fromRank.size() * 8, stream))
    return status;
  *sent = bounds[size_t(x->experts)];
  *received = total;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeDispatchRows(moeExchange *x, uint64_t rows,
                                  int64_t rowBytes, uint64_t received,
                                  uint64_t localIds, void *streamHandle) {
  const char *caller = "moeDispatchRows";
  if (moeStatus status = checkExchange(x, caller))
    return status;
  if (x->sendCount.empty())
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: no moeDispatchCounts came before", caller);
  if (rowBytes < 1)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: row_bytes must be at least 1, got %lld", caller,
                    static_cast<long long>(rowBytes));
  int N = x->ranks;
  int64_t L = x->local;
  std::vector<int64_t> recvAt(N, 0), recvCount(N, 0);
  std::vector<int32_t> ids;
  int64_t total = 0, sending = 0;
  for (int s = 0; s < N; ++s) {
    recvAt[s] = total;
    for (int64_t l = 0; l < L; ++l) {
      recvCount[s] += x->received[s * L + l];
      ids.insert(ids.end(), size_t(x->received[s * L + l]), int32_t(l));
    }
    total += recvCount[s];
    sending += x->sendCount[s];
  }
  if ((sending && !rows) || (total && (!received || !localIds)))
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: rows, received and local_ids must be non-null where "
                    "rows are sent or received",
                    caller);
  auto stream = static_cast<cu::Stream>(streamHandle);
  if (moeStatus status = toDevice(x->driver, caller, "local_ids", localIds,
                                  ids.data(), ids.size() * 4, stream))
    return status;
  return exchangeGroup(x, caller, size_t(rowBytes), rows, x->sendStart,
                       x->sendCount, received, recvAt, recvCount, stream);
}

MOE_API moeStatus moeUndispatch(moeExchange *x, uint64_t rows, int64_t numRows,
                                int64_t rowBytes, uint64_t counts,
                                uint64_t offsets, int32_t offsetsBits,
                                int64_t rowsSent, uint64_t result,
                                int64_t resultRows, void *streamHandle) {
  const char *caller = "moeUndispatch";
  if (moeStatus status = checkExchange(x, caller))
    return status;
  if (rowBytes < 1 || numRows < 0 || rowsSent < 0 || !counts)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: row_bytes must be at least 1, num_rows and rows_sent "
                    "at least 0, counts non-null",
                    caller);
  auto stream = static_cast<cu::Stream>(streamHandle);
  int N = x->ranks;
  int64_t L = x->local;
  std::vector<int64_t> fromRank(N);
  if (moeStatus status = toHost(x->driver, caller, "counts", fromRank.data(),
                                counts, size_t(N) * 8, stream))
    return status;
  std::vector<int64_t> bounds;
  if (moeStatus status = readOffsets(x, caller, offsets, offsetsBits, rowsSent,
                                     stream, bounds))
    return status;
  std::vector<int64_t> backAt(N, 0), sentAt(N), sentCount(N);
  int64_t total = 0;
  for (int s = 0; s < N; ++s) {
    if (fromRank[s] < 0)
      return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: counts[%d] is %lld",
                      caller, s, static_cast<long long>(fromRank[s]));
    backAt[s] = total;
    total += fromRank[s];
    sentAt[s] = bounds[s * L];
    sentCount[s] = bounds[(s + 1) * L] - bounds[s * L];
  }
  if (total != numRows)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: %lld rows to return, but counts sum to %lld", caller,
                    static_cast<long long>(numRows),
                    static_cast<long long>(total));
  if (resultRows != bounds[size_t(x->experts)])
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: the result has %lld rows, the dispatch sent %lld",
                    caller, static_cast<long long>(resultRows),
                    static_cast<long long>(bounds[size_t(x->experts)]));
  if ((total && !rows) || (resultRows && !result))
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: rows and result must be non-null where rows move",
                    caller);
  return exchangeGroup(x, caller, size_t(rowBytes), rows, backAt, fromRank,
                       result, sentAt, sentCount, stream);
}

MOE_API moeStatus moeNcclGetUniqueId(void *id) {
  const char *caller = "moeNcclGetUniqueId";
  if (!id)
    return setError(MOE_STATUS_INVALID_ARGUMENT, "%s: id is NULL", caller);
  std::string whyNot;
  const Nccl *nccl = getNccl(whyNot);
  if (!nccl)
    return setError(MOE_STATUS_UNSUPPORTED, "%s: %s", caller, whyNot.c_str());
  nccl::UniqueId unique;
  if (nccl::Result result = nccl->getUniqueId(&unique))
    return ncclError(nccl, caller, "ncclGetUniqueId", result);
  std::memcpy(id, unique.internal, sizeof(unique.internal));
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeNcclCommInitRank(int32_t ranks, const void *id,
                                      int32_t rank, void **comm) {
  const char *caller = "moeNcclCommInitRank";
  if (!id || !comm || ranks < 1 || rank < 0 || rank >= ranks)
    return setError(MOE_STATUS_INVALID_ARGUMENT,
                    "%s: id and comm must be non-null and 0 <= rank < ranks "
                    "(rank %d of %d)",
                    caller, rank, ranks);
  std::string whyNot;
  const Nccl *nccl = getNccl(whyNot);
  if (!nccl)
    return setError(MOE_STATUS_UNSUPPORTED, "%s: %s", caller, whyNot.c_str());
  nccl::UniqueId unique;
  std::memcpy(unique.internal, id, sizeof(unique.internal));
  nccl::Comm out = nullptr;
  if (nccl::Result result = nccl->commInitRank(&out, ranks, unique, rank))
    return ncclError(nccl, caller, "ncclCommInitRank", result);
  *comm = out;
  return MOE_STATUS_SUCCESS;
}

MOE_API moeStatus moeNcclCommDestroy(void *comm) {
  const char *caller = "moeNcclCommDestroy";
  if (!comm)
    return MOE_STATUS_SUCCESS;
  std::string whyNot;
  const Nccl *nccl = getNccl(whyNot);
  if (!nccl)
    return setError(MOE_STATUS_UNSUPPORTED, "%s: %s", caller, whyNot.c_str());
  if (nccl::Result result = nccl->commDestroy(static_cast<nccl::Comm>(comm)))
    return ncclError(nccl, caller, "ncclCommDestroy", result);
  return MOE_STATUS_SUCCESS;
}

} // extern "C"
