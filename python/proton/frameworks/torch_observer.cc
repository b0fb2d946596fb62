// PyTorch's operators as Proton frames: a RecordFunction observer (at::addGlobalCallback)
// that reports operators, backward nodes and record_function ranges through
// proton/framework.h. Built by python/proton/frameworks/pytorch.py against the installed
// torch's own headers, loaded with ctypes; it links to nothing of Proton's.
//
// Threading: the callbacks run on whichever thread runs the operator; the table pointer is
// set before the callback is added and never changes after.
#include <ATen/record_function.h>

#include <atomic>
#include <cstring>

#include "proton/framework.h"

namespace {

const proton_framework_api *api = nullptr;
std::atomic<bool> installed{false};
at::CallbackHandle handle = 0;

// The engine's own range around each backward node ("...: AddmmBackward0") carries the
// node's sequence number on the worker thread; the node's own BACKWARD_FUNCTION range follows.
constexpr char kEvaluate[] = "autograd::engine::evaluate_function: ";

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction &fn) {
  const char *name = fn.name();
  int kind = PROTON_OP_FORWARD;
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      kind = PROTON_OP_BACKWARD;
      break;
    case at::RecordScope::USER_SCOPE:
      kind = PROTON_OP_RANGE;
      break;
    default:
      if (name && std::strncmp(name, kEvaluate, sizeof(kEvaluate) - 1) == 0) kind = PROTON_OP_SKIP;
      break;
  }
  api->enter_op(name, kind, fn.seqNr(), fn.threadId(), fn.forwardThreadId());
  return nullptr;
}

void onEnd(const at::RecordFunction &, at::ObserverContext *) { api->exit_op(); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int proton_torch_observer_install(
    const void *table) {
  const auto *t = static_cast<const proton_framework_api *>(table);
  if (!t || t->version != PROTON_FRAMEWORK_API_VERSION || t->size < sizeof(proton_framework_api))
    return -1;
  if (installed.exchange(true)) return 0;
  api = t;
  handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&onStart, &onEnd)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
  return 0;
}

extern "C" __attribute__((visibility("default"))) void proton_torch_observer_remove() {
  if (!installed.exchange(false)) return;
  at::removeCallback(handle);
}
