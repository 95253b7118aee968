//===- ExchangeTests.cpp - moe.dispatch / moe.undispatch over a fake NCCL -===//
//
// N ranks as N threads of one process: the fake driver's device memory is
// host memory, and a fake NCCL matches each rank's grouped sends with the
// receives of their peers once every rank has ended its group. The
// exchanges must do what moe.dispatch and moe.undispatch define
// (docs/expert-parallel.md; test/lib/ep_case.py's numpy exchanges for the
// CPU), for ragged and empty experts, dropped rows past offsets[E], and
// offsets the readers clamp.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"
#include "NcclAPI.h"
#include "TestHarness.h"

#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

using namespace moe::runtime;
using moe_test::installFakeDriver;

namespace {

struct FakeOp {
  bool send;
  int peer;
  char *data;
  size_t bytes;
};

/// The ranks of one communicator: each ncclGroupEnd waits for all of them
/// to post their group, then every receive takes its peer's next send to it.
struct FakeWorld {
  explicit FakeWorld(int ranks) : ranks(ranks), posted(ranks) {}
  int ranks;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::vector<FakeOp>> posted;
  int arrived = 0;
  long generation = 0;
  nccl::Result outcome = nccl::kSuccess;
  long groups = 0;
};

struct FakeComm {
  FakeWorld *world;
  int rank;
};

thread_local std::vector<FakeOp> pending;
thread_local FakeComm *pendingComm = nullptr;

nccl::Result fakeGroupStart() {
  pending.clear();
  pendingComm = nullptr;
  return nccl::kSuccess;
}

nccl::Result post(bool send, const void *data, size_t count,
                  nccl::DataType type, int peer, nccl::Comm comm) {
  auto *c = reinterpret_cast<FakeComm *>(comm);
  if (peer < 0 || peer >= c->world->ranks || (pendingComm && pendingComm != c))
    return 4; // ncclInvalidArgument
  pendingComm = c;
  if (type != nccl::kInt8)
    return 4;
  pending.push_back(
      FakeOp{send, peer, static_cast<char *>(const_cast<void *>(data)), count});
  return nccl::kSuccess;
}

nccl::Result fakeSend(const void *data, size_t count, nccl::DataType type,
                      int peer, nccl::Comm comm, cu::Stream) {
  return post(true, data, count, type, peer, comm);
}

nccl::Result fakeRecv(void *data, size_t count, nccl::DataType type, int peer,
                      nccl::Comm comm, cu::Stream) {
  return post(false, data, count, type, peer, comm);
}

nccl::Result fakeGroupEnd() {
  FakeComm *c = pendingComm;
  if (!c)
    return nccl::kSuccess; // an empty group
  FakeWorld &w = *c->world;
  std::unique_lock<std::mutex> lock(w.mutex);
  w.posted[c->rank] = pending;
  long generation = w.generation;
  if (++w.arrived == w.ranks) {
    // Match: rank r's k-th receive from p is p's k-th send to r.
    w.outcome = nccl::kSuccess;
    for (int r = 0; r < w.ranks; ++r)
      for (int p = 0; p < w.ranks; ++p) {
        std::vector<FakeOp *> sends, recvs;
        for (FakeOp &op : w.posted[p])
          if (op.send && op.peer == r)
            sends.push_back(&op);
        for (FakeOp &op : w.posted[r])
          if (!op.send && op.peer == p)
            recvs.push_back(&op);
        if (sends.size() != recvs.size()) {
          w.outcome = 5; // ncclInvalidUsage: unmatched
          continue;
        }
        for (size_t k = 0; k < sends.size(); ++k) {
          if (sends[k]->bytes != recvs[k]->bytes)
            w.outcome = 5;
          else
            std::memcpy(recvs[k]->data, sends[k]->data, sends[k]->bytes);
        }
      }
    ++w.groups;
    w.arrived = 0;
    ++w.generation;
    w.changed.notify_all();
  } else {
    w.changed.wait(lock, [&] { return w.generation != generation; });
  }
  pending.clear();
  pendingComm = nullptr;
  return w.outcome;
}

nccl::Result fakeCommCount(const nccl::Comm comm, int *count) {
  *count = reinterpret_cast<FakeComm *>(comm)->world->ranks;
  return nccl::kSuccess;
}

nccl::Result fakeCommUserRank(const nccl::Comm comm, int *rank) {
  *rank = reinterpret_cast<FakeComm *>(comm)->rank;
  return nccl::kSuccess;
}

const char *fakeErrorString(nccl::Result result) {
  return result == 5 ? "invalid usage (fake)" : "fake NCCL error";
}

const Nccl &fakeNccl() {
  static const Nccl table = [] {
    Nccl n;
    n.getVersion = [](int *v) {
      *v = 23206;
      return nccl::kSuccess;
    };
    n.getUniqueId = [](nccl::UniqueId *) { return nccl::Result(2); };
    n.commInitRank = [](nccl::Comm *, int, nccl::UniqueId, int) {
      return nccl::Result(2);
    };
    n.commDestroy = [](nccl::Comm) { return nccl::kSuccess; };
    n.commCount = fakeCommCount;
    n.commUserRank = fakeCommUserRank;
    n.groupStart = fakeGroupStart;
    n.groupEnd = fakeGroupEnd;
    n.send = fakeSend;
    n.recv = fakeRecv;
    n.getErrorString = fakeErrorString;
    return n;
  }();
  return table;
}

/// One rank's layer-side values: M rows of 8 bytes (rank, row), grouped by
/// expert by `offsets` (E + 1), rows past offsets[E] dropped ids' rows.
struct RankRows {
  std::vector<int64_t> offsets;
  std::vector<int32_t> rows; // 2 per row
};

/// moe.dispatch's and moe.undispatch's results by their definition.
struct Expected {
  std::vector<int32_t> received, ids;
  std::vector<int64_t> counts;
};

std::vector<int64_t> clamped(const std::vector<int64_t> &offsets, int64_t M) {
  std::vector<int64_t> out(offsets.size());
  int64_t end = 0;
  for (size_t e = 0; e < offsets.size(); ++e) {
    end = offsets[e] < end ? end : offsets[e] > M ? M : offsets[e];
    out[e] = e ? end : 0;
  }
  return out;
}

Expected dispatchOf(const std::vector<RankRows> &ranks, int d, int64_t L) {
  Expected x;
  for (const RankRows &s : ranks) {
    std::vector<int64_t> b = clamped(s.offsets, s.rows.size() / 2);
    int64_t n = 0;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t r = b[d * L + l]; r < b[d * L + l + 1]; ++r, ++n) {
        x.received.push_back(s.rows[2 * r]);
        x.received.push_back(s.rows[2 * r + 1]);
        x.ids.push_back(int32_t(l));
      }
    x.counts.push_back(n);
  }
  return x;
}

struct RankOutcome {
  moeStatus create = MOE_STATUS_SUCCESS, counts = MOE_STATUS_SUCCESS,
            rows = MOE_STATUS_SUCCESS, back = MOE_STATUS_SUCCESS;
  std::string error;
  int64_t sent = -1, received = -1;
  std::vector<int64_t> counted;
  std::vector<int32_t> got, ids, returned;
};

uint64_t dev(const void *p) { return reinterpret_cast<uint64_t>(p); }

/// Runs dispatch then undispatch on every rank (a thread each): each rank
/// returns its received rows with 1000 added to their second word.
std::vector<RankOutcome> runRanks(std::vector<RankRows> &ranks, int64_t E,
                                  int bits) {
  int N = int(ranks.size());
  FakeWorld world(N);
  std::vector<FakeComm> comms(N);
  std::vector<RankOutcome> out(N);
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r) {
    comms[r] = {&world, r};
    threads.emplace_back([&, r] {
      RankOutcome &o = out[r];
      RankRows &mine = ranks[r];
      int64_t M = int64_t(mine.rows.size() / 2);
      std::vector<int32_t> narrow(mine.offsets.begin(), mine.offsets.end());
      uint64_t offsets =
          bits == 32 ? dev(narrow.data()) : dev(mine.offsets.data());
      moeExchange *x = nullptr;
      auto done = [&](moeStatus &slot, moeStatus status) {
        slot = status;
        if (status)
          o.error = moeLastErrorMessage();
        return status == MOE_STATUS_SUCCESS;
      };
      if (!done(o.create, moeExchangeCreate(&comms[r], E, &x)))
        return;
      uint64_t bytes = 0;
      moeExchangeWorkspaceBytes(x, &bytes);
      std::vector<int64_t> workspace(bytes / 8 + 1);
      o.counted.assign(N, -1);
      if (done(o.counts,
               moeDispatchCounts(x, offsets, bits, M, dev(o.counted.data()),
                                 dev(workspace.data()), &o.sent, &o.received,
                                 nullptr))) {
        o.got.assign(size_t(2 * o.received), -7); // poisoned
        o.ids.assign(size_t(o.received), -7);
        if (done(o.rows,
                 moeDispatchRows(x, dev(mine.rows.data()), 8, dev(o.got.data()),
                                 dev(o.ids.data()), nullptr))) {
          std::vector<int32_t> back = o.got;
          for (size_t i = 1; i < back.size(); i += 2)
            back[i] += 1000;
          o.returned.assign(size_t(2 * o.sent), -7);
          done(o.back, moeUndispatch(x, dev(back.data()), o.received, 8,
                                     dev(o.counted.data()), offsets, bits, M,
                                     dev(o.returned.data()), o.sent, nullptr));
        }
      }
      moeExchangeDestroy(x);
    });
  }
  for (std::thread &t : threads)
    t.join();
  return out;
}

/// Random ragged groups over E experts of T*k rows, `drop` of them dropped
/// (past offsets[E]); expert `cold` gets none.
RankRows randomRank(std::mt19937 &rng, int rank, int64_t E, int64_t rows,
                    int64_t drop, int64_t cold) {
  RankRows r;
  std::vector<int64_t> sizes(size_t(E), 0);
  for (int64_t i = 0; i < rows - drop; ++i) {
    int64_t e = int64_t(rng() % uint32_t(E));
    sizes[size_t(e == cold ? (e + 1) % E : e)]++;
  }
  r.offsets.push_back(0);
  for (int64_t s : sizes)
    r.offsets.push_back(r.offsets.back() + s);
  for (int64_t i = 0; i < rows; ++i) {
    r.rows.push_back(rank);
    r.rows.push_back(int32_t(i));
  }
  return r;
}

void checkRanks(std::vector<RankRows> &ranks, int64_t E, int bits) {
  int N = int(ranks.size());
  std::vector<RankOutcome> out = runRanks(ranks, E, bits);
  for (int r = 0; r < N; ++r) {
    const RankOutcome &o = out[r];
    CHECK_EQ(o.error, std::string());
    Expected want = dispatchOf(ranks, r, E / N);
    CHECK_EQ(o.received, int64_t(want.ids.size()));
    CHECK(o.counted == want.counts);
    CHECK(o.got == want.received);
    CHECK(o.ids == want.ids);
    std::vector<int64_t> b =
        clamped(ranks[r].offsets, int64_t(ranks[r].rows.size() / 2));
    CHECK_EQ(o.sent, b[size_t(E)]);
    std::vector<int32_t> back(ranks[r].rows.begin(),
                              ranks[r].rows.begin() + 2 * b[size_t(E)]);
    for (size_t i = 1; i < back.size(); i += 2)
      back[i] += 1000;
    CHECK(o.returned == back);
  }
}

struct InstallFakes {
  InstallFakes() {
    installFakeDriver();
    setNcclForTesting(&fakeNccl());
  }
  ~InstallFakes() { setNcclForTesting(nullptr); }
};

} // namespace

TEST(exchangeOneRankKeepsRowsAndGivesExperts) {
  InstallFakes fakes;
  std::mt19937 rng(7);
  for (int bits : {64, 32}) {
    std::vector<RankRows> ranks = {randomRank(rng, 0, 8, 40, 3, 5)};
    checkRanks(ranks, 8, bits);
  }
}

TEST(exchangeRanksMatchDefinition) {
  InstallFakes fakes;
  std::mt19937 rng(11);
  for (int N : {2, 4, 8}) {
    std::vector<RankRows> ranks;
    for (int r = 0; r < N; ++r)
      // Unequal rows, one rank with none, dropped rows, a cold expert.
      ranks.push_back(
          randomRank(rng, r, 16, r == 1 ? 0 : 10 + 7 * r, r % 3, (3 * r) % 16));
    checkRanks(ranks, 16, 64);
  }
}

TEST(exchangeSkewedAllToOneRank) {
  InstallFakes fakes;
  // Every row to rank 0's experts: the other ranks receive nothing.
  std::vector<RankRows> ranks(4);
  for (int r = 0; r < 4; ++r) {
    ranks[r].offsets = {0, 5, 9, 9, 9, 9, 9, 9, 9};
    for (int i = 0; i < 9; ++i)
      ranks[r].rows.insert(ranks[r].rows.end(), {r, i});
  }
  checkRanks(ranks, 8, 64);
}

TEST(exchangeClampsOffsets) {
  InstallFakes fakes;
  // Offsets past the rows and decreasing ones are read as grouped_matmul
  // reads them.
  std::vector<RankRows> ranks(2);
  ranks[0].offsets = {0, 3, 2, 6, 50};
  ranks[1].offsets = {0, 0, 4, 4, 4};
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 7; ++i)
      ranks[r].rows.insert(ranks[r].rows.end(), {r, i});
  checkRanks(ranks, 4, 64);
}

TEST(exchangeRefusals) {
  InstallFakes fakes;
  FakeWorld world(2);
  FakeComm comm{&world, 0};
  moeExchange *x = nullptr;
  CHECK_STATUS(moeExchangeCreate(nullptr, 8, &x), MOE_STATUS_INVALID_ARGUMENT,
               "nccl_comm is NULL");
  CHECK_STATUS(moeExchangeCreate(&comm, 7, &x), MOE_STATUS_INVALID_ARGUMENT,
               "7 experts cannot be split evenly over 2 ranks");
  CHECK_STATUS(moeExchangeCreate(&comm, 0, &x), MOE_STATUS_INVALID_ARGUMENT,
               "experts must be at least 1");
  CHECK_EQ(moeExchangeCreate(&comm, 8, &x), MOE_STATUS_SUCCESS);
  int32_t ranks = 0, rank = -1;
  CHECK_EQ(moeExchangeGetRanks(x, &ranks, &rank), MOE_STATUS_SUCCESS);
  CHECK_EQ(ranks, 2);
  CHECK_EQ(rank, 0);
  uint64_t bytes = 0;
  CHECK_EQ(moeExchangeWorkspaceBytes(x, &bytes), MOE_STATUS_SUCCESS);
  CHECK_EQ(bytes, uint64_t(2 * 8 * 8));
  int64_t offsets[9] = {0}, counts[2], sent, received;
  CHECK_STATUS(moeDispatchRows(x, 0, 8, 0, 0, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "no moeDispatchCounts came before");
  CHECK_STATUS(moeDispatchCounts(x, dev(offsets), 16, 0, dev(counts),
                                 dev(counts), &sent, &received, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "offsets_bits must be 32 or 64");
  CHECK_STATUS(moeDispatchCounts(x, dev(offsets), 64, -1, dev(counts),
                                 dev(counts), &sent, &received, nullptr),
               MOE_STATUS_INVALID_ARGUMENT, "rows must be at least 0");
  counts[0] = 3;
  counts[1] = 0;
  int32_t rows[8];
  CHECK_STATUS(moeUndispatch(x, dev(rows), 2, 8, dev(counts), dev(offsets), 64,
                             0, dev(rows), 0, nullptr),
               MOE_STATUS_INVALID_ARGUMENT,
               "2 rows to return, but counts sum to 3");
  counts[0] = 2;
  CHECK_STATUS(moeUndispatch(x, dev(rows), 2, 8, dev(counts), dev(offsets), 64,
                             0, dev(rows), 4, nullptr),
               MOE_STATUS_INVALID_ARGUMENT,
               "the result has 4 rows, the dispatch sent 0");
  CHECK_STATUS(moeExchangeGetRanks(nullptr, &ranks, &rank),
               MOE_STATUS_INVALID_ARGUMENT, "exchange is NULL");
  moeExchangeDestroy(x);
}

TEST(exchangeWithoutNcclIsUnsupported) {
  InstallFakes fakes;
  setNcclForTesting(nullptr, "dlopen(libnccl.so.2) failed: not found");
  FakeWorld world(1);
  FakeComm comm{&world, 0};
  moeExchange *x = nullptr;
  CHECK_STATUS(moeExchangeCreate(&comm, 8, &x), MOE_STATUS_UNSUPPORTED,
               "no NCCL: dlopen(libnccl.so.2) failed: not found");
  CHECK(x == nullptr);
  char id[128];
  CHECK_STATUS(moeNcclGetUniqueId(id), MOE_STATUS_UNSUPPORTED, "no NCCL");
}

TEST(exchangeNcclErrorsNamed) {
  InstallFakes fakes;
  char id[128];
  CHECK_STATUS(moeNcclGetUniqueId(id), MOE_STATUS_CUDA_ERROR,
               "ncclGetUniqueId failed: ncclResult_t 2");
  void *comm = nullptr;
  CHECK_STATUS(moeNcclCommInitRank(2, id, 2, &comm),
               MOE_STATUS_INVALID_ARGUMENT, "rank 2 of 2");
}
