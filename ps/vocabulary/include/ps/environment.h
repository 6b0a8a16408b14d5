// Environment: the variables a node reads at Start, as ps-lite's apps set and read them.
// Environment::Init(kvs) overlays `kvs` on the process environment (MXNet and BytePS
// hand their settings to the runtime this way); find(name) returns the overlay's value,
// else getenv's. The runtime reads its PS_* / DMLC_* configuration through it, so an
// overlay set before ps::Start takes effect.
//
// Thread safety: Init replaces the overlay and must not race with find or with
// ps::Start; find may be called from any number of threads otherwise. Pointers that
// find returns stay valid until the next Init.
#ifndef PS_ENVIRONMENT_H_
#define PS_ENVIRONMENT_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>

namespace ps {

class Environment {
 public:
  static Environment* Get() { return Instance().get(); }
  // The same instance, shared (ps-lite spells it so).
  static std::shared_ptr<Environment> _GetSharedRef() { return Instance(); }
  // Replaces the overlay by `kvs`. Returns the instance.
  static Environment* Init(const std::unordered_map<std::string, std::string>& kvs) {
    Environment* env = Get();
    env->kvs_ = kvs;
    return env;
  }
  // The overlay's value of `name`, else the process environment's, else nullptr.
  const char* find(const char* name) const {
    auto it = kvs_.find(name);
    return it != kvs_.end() ? it->second.c_str() : std::getenv(name);
  }

 private:
  static std::shared_ptr<Environment>& Instance() {
    static std::shared_ptr<Environment> instance(new Environment);
    return instance;
  }
  Environment() = default;
  std::unordered_map<std::string, std::string> kvs_;
};

// The value of `key` (see Environment::find) converted to V (constructed from the
// string: std::string, const char*), or default_val when it is not set.
template <typename V>
inline V GetEnv(const char* key, V default_val) {
  const char* val = Environment::Get()->find(key);
  return val ? V(val) : default_val;
}
// As an integer (atoi, as ps-lite reads it: text that is not a number reads as 0).
inline int GetEnv(const char* key, int default_val) {
  const char* val = Environment::Get()->find(key);
  return val ? std::atoi(val) : default_val;
}

}  // namespace ps

#endif  // PS_ENVIRONMENT_H_
