// proton/framework.h: the C interface a framework's operator observer reports through, for
// context="<framework>" ("torch"): operators and backward nodes become frames of the calling
// thread's context, as scopes do, seen by the sessions whose context lists the framework.
//
//   const proton_framework_api *api = ...;   // proton._C.framework_api() (an address)
//   api->enter_op("aten::addmm", PROTON_OP_FORWARD, seq, thread, 0);
//   ... kernels launched here are filed under .../aten::addmm ...
//   api->exit_op();
//
// The observer is a library built against the framework's own headers (PyTorch's
// RecordFunction callbacks, at::addGlobalCallback): no C++ type crosses between it and
// Proton, only this table of plain C functions, so either side may be built by another
// compiler or standard library. A backward node names the forward operator that made it by
// (forward thread, sequence number): Proton files it under that operator's module path, then
// "backward: <operator>".
//
// Threading: every function may be called from any thread, concurrently; enter_op and
// exit_op pair on one thread, innermost first. They never throw, take no lock shared between
// threads in steady state, and cost one relaxed atomic load while no session wants them.
#ifndef PROTON_FRAMEWORK_H_
#define PROTON_FRAMEWORK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum proton_op_kind {
  PROTON_OP_FORWARD = 0,   // an operator (aten::addmm)
  PROTON_OP_BACKWARD = 1,  // a backward node (AddmmBackward0): sequence and forward_thread
  PROTON_OP_RANGE = 2,     // a range the user named (record_function)
  PROTON_OP_SKIP = 3       // a range that is no frame of its own; exit_op still follows
};

#define PROTON_FRAMEWORK_API_VERSION 1u

typedef struct proton_framework_api {
  uint32_t version;  // PROTON_FRAMEWORK_API_VERSION
  uint32_t size;     // sizeof(proton_framework_api)
  // An operator starts on the calling thread. thread: the framework's id of this thread;
  // sequence: the autograd sequence number (-1: none); forward_thread: for a backward node,
  // the framework's id of the thread that ran its forward operator.
  void (*enter_op)(const char *name, int kind, int64_t sequence, uint64_t thread,
                   uint64_t forward_thread);
  // The innermost operator entered on the calling thread ends.
  void (*exit_op)(void);
} proton_framework_api;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // PROTON_FRAMEWORK_H_
