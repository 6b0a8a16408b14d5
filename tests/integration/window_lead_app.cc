// Integration: the first request of a window (docs/architecture.md, "Coalescing"). One
// worker, any number of servers that keep what is pushed. The worker checks, from its
// van's counters, that
//   - requests issued one at a time (each waited for) go at once, never in a batch;
//   - once requests come in windows, a window's first request waits in the batch with
//     the rest (every request of a window is coalesced, not all but the first);
//   - a first request with a callback goes at once;
//   - a first request nobody waits for goes by the van's deadline (deadline_flushes);
//   - once the app stops waiting (it polls NumInFlight), first requests go at once;
//   - after that, requests one at a time go at once again;
// and that the values pulled at the end are what it pushed. With PS_COALESCE_FIRST=0 it
// checks instead that no first request waits (no window batched whole, no deadline
// flush). Prints "window_lead: ok", or what failed and exits 1.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/ps.h"

namespace {

constexpr int kWindow = 8;

int failures = 0;

#define EXPECT(cond, ...)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      std::printf("window_lead: FAILED %s: ", #cond);          \
      std::printf(__VA_ARGS__);                                \
      std::printf("\n");                                       \
      ++failures;                                              \
    }                                                          \
  } while (0)

ps::VanStats Stats() { return ps::Postoffice::Get()->van()->stats(); }

// Keeps the last value pushed to each key; a pull answers it.
void KeepLast(const ps::KVMeta& meta, const ps::KVPairs<float>& data,
              ps::KVServer<float>* server) {
  static std::vector<float> store(1024, 0.0f);
  ps::KVPairs<float> res;
  if (meta.push) {
    for (size_t i = 0; i < data.keys.size(); ++i) {
      store[data.keys[i] % store.size()] = data.vals[i];
    }
  } else {
    res.keys = data.keys;
    for (ps::Key k : data.keys) res.vals.push_back(store[k % store.size()]);
  }
  server->Response(meta, res);
}

void PushOneAtATime(ps::KVWorker<float>* kv, int times, float value) {
  for (int i = 0; i < times; ++i) kv->Wait(kv->Push({1}, {value}));
}

// `windows` windows of kWindow pushes to keys 1..kWindow, each window waited for.
void PushWindows(ps::KVWorker<float>* kv, int windows, float value) {
  std::vector<int> ts(kWindow);
  for (int w = 0; w < windows; ++w) {
    for (int i = 0; i < kWindow; ++i) {
      ts[i] = kv->Push({static_cast<ps::Key>(i + 1)}, {value + static_cast<float>(i)});
    }
    for (int t : ts) kv->Wait(t);
  }
}

// Waits up to 30 s, without flushing anything, until no request is in flight.
bool DrainsWithin30s(ps::KVWorker<float>* kv) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (kv->NumInFlight() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return kv->NumInFlight() == 0;
}

// One window of kWindow pushes to keys 1..kWindow, not waited for: polled until done.
void PushWindowUnwaited(ps::KVWorker<float>* kv, float value) {
  for (int i = 0; i < kWindow; ++i) {
    kv->Push({static_cast<ps::Key>(i + 1)}, {value + static_cast<float>(i)});
  }
  EXPECT(DrainsWithin30s(kv), "a window nobody waited for did not finish");
}

void RunWorker() {
  const char* first = std::getenv("PS_COALESCE_FIRST");
  const bool first_waits = first == nullptr || std::string(first) != "0";
  ps::KVWorker<float> kv(0, 0);
  ps::VanStats before = Stats();
  PushOneAtATime(&kv, 200, 1.0f);
  ps::VanStats after = Stats();
  EXPECT(after.coalesced_messages == before.coalesced_messages,
         "%llu requests made one at a time went in batches",
         static_cast<unsigned long long>(after.coalesced_messages - before.coalesced_messages));

  // The first window teaches the worker that windows come; from the second on every
  // request waits in the batch, its first one too (one at once and 7 batched before).
  // With first requests at once, 7 of each window's 8 are batched: 700. The bound lies
  // halfway to 800, so that a thread stalled past the deadline now and then (a loaded
  // machine: the first request goes alone, its answer is back before the second is
  // issued, which then goes at once) does not fail it.
  constexpr int kWindows = 100;
  before = Stats();
  PushWindows(&kv, kWindows, 2.0f);
  after = Stats();
  const uint64_t batched = after.coalesced_messages - before.coalesced_messages;
  if (first_waits) {
    EXPECT(batched >= static_cast<uint64_t>(kWindows * (kWindow - 1) + kWindows / 2),
           "only %llu of %d requests in windows went in batches",
           static_cast<unsigned long long>(batched), kWindows * kWindow);
  } else {
    EXPECT(batched <= static_cast<uint64_t>(kWindows * (kWindow - 1)),
           "%llu of %d requests in windows went in batches, first requests among them",
           static_cast<unsigned long long>(batched), kWindows * kWindow);
  }

  // A first request with a callback goes at once, even right after windows.
  std::atomic<bool> called{false};
  before = Stats();
  kv.Push({1}, {3.0f}, {}, 0, [&called] { called = true; });
  after = Stats();
  EXPECT(after.coalesced_messages == before.coalesced_messages,
         "a first request with a callback waited in a batch");
  EXPECT(DrainsWithin30s(&kv) && called.load(), "the request with a callback did not finish");

  // A first request nobody waits for, after windows: the van's deadline sends it. The
  // pause lets the receive thread finish with the window's answers first: one still
  // going when the request is coalesced sends it when it runs out of input (earlier, and
  // right, but then the deadline is not what sent it).
  before = Stats();
  for (int i = 0; i < 5; ++i) {
    PushWindows(&kv, 1, 4.0f);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kv.Push({1}, {5.0f});
    EXPECT(DrainsWithin30s(&kv), "a push nobody waited for did not finish");
  }
  after = Stats();
  if (first_waits) {
    EXPECT(after.deadline_flushes > before.deadline_flushes,
           "no request went by the van's deadline (%llu deadline flushes)",
           static_cast<unsigned long long>(after.deadline_flushes));
  } else {
    EXPECT(after.deadline_flushes == 0, "%llu deadline flushes with first requests at once",
           static_cast<unsigned long long>(after.deadline_flushes));
  }

  // Windows the app does not wait for (it polls NumInFlight, which sends nothing): a
  // first request goes at once, since nothing but the deadline would send it.
  PushWindowUnwaited(&kv, 4.0f);
  before = Stats();
  PushWindowUnwaited(&kv, 4.0f);
  after = Stats();
  EXPECT(after.coalesced_messages - before.coalesced_messages <= kWindow - 1,
         "%llu of a window's %d requests nobody waited for went in batches, the first too",
         static_cast<unsigned long long>(after.coalesced_messages - before.coalesced_messages),
         kWindow);

  // One at a time, waited for, after windows nobody waited for: each goes at once.
  before = Stats();
  PushOneAtATime(&kv, 50, 6.0f);
  after = Stats();
  EXPECT(after.coalesced_messages == before.coalesced_messages,
         "%llu requests made one at a time after windows went in batches",
         static_cast<unsigned long long>(after.coalesced_messages - before.coalesced_messages));

  std::vector<ps::Key> keys;
  for (int i = 1; i <= kWindow; ++i) keys.push_back(static_cast<ps::Key>(i));
  std::vector<float> got;
  kv.Wait(kv.Pull(keys, &got));
  EXPECT(got.size() == keys.size() && got[0] == 6.0f, "key 1 holds %g",
         got.empty() ? -1.0 : got[0]);
  for (size_t i = 1; i < got.size(); ++i) {
    EXPECT(got[i] == 4.0f + static_cast<float>(i), "key %zu holds %g", i + 1, got[i]);
  }
  if (failures == 0) std::printf("window_lead: ok\n");
}

}  // namespace

int main() {
  ps::Start(0);
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    server->set_request_handle(KeepLast);
  }
  if (ps::IsWorker()) RunWorker();
  ps::Finalize(0, true);
  return failures == 0 ? 0 : 1;
}
