// Fork safety: what a child made by fork() (os.fork, multiprocessing's "fork" start method)
// inherits from a profiled parent.
//
//   installForkHandlers();   // once, when the session manager is first used
//
// Before fork the core's leaf locks (string table, stats, device table, Python stack table,
// thread registry) are taken, so the child never inherits one held by a thread that does not
// exist there. In the child: the parent's sessions are gone (the parent writes them; the
// child writes nothing unless it starts its own session), the stats table starts from zero,
// the forking thread becomes the main thread, and GPU profiling is off if the parent had
// started it (CUDA and CUPTI cannot be used again in such a child): a session started in the
// child records CPU scopes and metrics, with one warning. Thread-safe; idempotent.
#pragma once

namespace proton {

void installForkHandlers();

}  // namespace proton
