// The bench server handle: keeps each key's latest values by reference and answers
// pulls with them, so that the figures measure the system (framing, routing, request
// tracking, copies), not arithmetic. With `fresh_pulls`, every pull is answered with a
// newly allocated copy instead, as handles that build their answer per request do
// (ps-lite's own benchmark among them): that measures how the node's memory allocator
// copes with a large buffer made and freed per request.
#ifndef HERDPS_APPS_BENCH_STORE_HANDLE_H_
#define HERDPS_APPS_BENCH_STORE_HANDLE_H_

#include <unordered_map>

#include "ps/ps.h"

namespace bench {

constexpr int kCmdRawPort = 1;  // pull cmd that returns the server's raw port

struct StoreHandle {
  int raw_port = 0;  // answered to a pull with cmd kCmdRawPort
  bool fresh_pulls = false;
  std::unordered_map<ps::Key, ps::SArray<float>> store;
  void operator()(const ps::KVMeta& meta, const ps::KVPairs<float>& data,
                  ps::KVServer<float>* server) {
    ps::KVPairs<float> res;
    if (meta.cmd == kCmdRawPort) {
      res.keys = data.keys;
      res.vals = ps::SArray<float>(data.keys.size(), static_cast<float>(raw_port));
      server->Response(meta, res);
      return;
    }
    if (meta.push) {
      size_t width = data.keys.empty() ? 0 : data.vals.size() / data.keys.size();
      for (size_t i = 0; i < data.keys.size(); ++i) {
        store[data.keys[i]] = data.vals.segment(i * width, (i + 1) * width);
      }
    }
    if (meta.pull) {
      res.keys = data.keys;
      for (ps::Key k : data.keys) {
        auto it = store.find(k);
        if (it == store.end()) {
          server->ResponseError(meta, ps::Status::NotFound("key never pushed"));
          return;
        }
        if (fresh_pulls) {
          res.vals.append(it->second);  // a new buffer per answer (appending copies)
        } else if (data.keys.size() == 1) {
          res.vals = it->second;  // shared, not copied
        } else {
          res.vals.append(it->second);
        }
      }
    }
    server->Response(meta, res);
  }
};

}  // namespace bench

#endif  // HERDPS_APPS_BENCH_STORE_HANDLE_H_
