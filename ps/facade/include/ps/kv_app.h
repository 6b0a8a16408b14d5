// The KV API in one include, as ps-lite spells it: KVWorker, KVServer,
// KVServerDefaultHandle, KVPairs, KVMeta.
//
// This header and ps/ps.h are the façade: the only runtime headers that include the
// worker/ and server/ layers, so that an app needs one include line.
#ifndef PS_KV_APP_H_
#define PS_KV_APP_H_

#include "ps/kv_pairs.h"
#include "ps/kv_server.h"
#include "ps/kv_worker.h"

#endif  // PS_KV_APP_H_
