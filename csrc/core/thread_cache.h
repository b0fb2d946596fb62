// ThreadCache<T>: one T per thread that is gone, not dangling, once the thread's
// thread_local objects are destroyed. glibc destroys a thread's thread_local objects before the
// functions registered with atexit run, and Proton writes a profile from one of those (a native
// program's injected session), which still interns names and sees launches: there get()
// returns null and the caller goes without its cache.
//
//   if (Names *cache = ThreadCache<Names>::get()) ... else ...;  // else: no cache
//
// Thread-safety: each thread sees its own T only.
#pragma once

namespace proton {

template <class T>
class ThreadCache {
 public:
  static T *get() { return gone_ ? nullptr : &holder_.value; }

 private:
  struct Holder {
    ~Holder() { gone_ = true; }
    T value;
  };
  // Trivially destructible: readable until the thread is gone.
  static inline thread_local bool gone_ = false;
  static inline thread_local Holder holder_;
};

}  // namespace proton
