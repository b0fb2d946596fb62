// Framework adapters (python/proton/frameworks/): module frames from their hooks, the compiled
// kernels' frames, the address of the C table their operator observers call
// (proton/framework.h), and the caller's side of backward attribution.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <thread>

#include "bindings/common.h"
#include "context/backward_borrow.h"
#include "context/forward_ops.h"
#include "context/stack_join.h"
#include "core/string_table.h"
#include "runtime/framework_frames.h"
#include "runtime/session_manager.h"

namespace proton::bindings {

void bindFramework(nb::module_ &m) {
  m.def(
      "framework_live", [] { return SessionManager::global().frameworkLive(); },
      "True while a session's context lists a framework (its frames are wanted).");
  m.def(
      "framework_api", [] { return reinterpret_cast<uintptr_t>(frameworkApi()); },
      "The address of the proton_framework_api table (proton/framework.h) an operator "
      "observer built against a framework's headers calls.");
  m.def(
      "enter_module", [](nb::handle name) { enterModuleFrame(internName(name)); }, nb::arg("name"),
      "A module's forward starts on this thread (its frame splices between the Python frames "
      "open now). Pairs with exit_module.");
  m.def("exit_module", &exitModuleFrame, "The innermost module entered with enter_module ends.");
  m.def(
      "enter_frames",
      [](const std::vector<std::string> &names) {
        thread_local std::vector<StringId> ids;
        ids.clear();
        for (const std::string &n : names) ids.push_back(StringTable::global().intern(n));
        enterFrames(ids.data(), ids.size());
      },
      nb::arg("names"), "Frames pushed together (a compiled kernel's module path and operators).");
  m.def("exit_frames", &exitFrames, "Pops the frames of the innermost enter_frames.");
  m.def(
      "enter_op",
      [](const std::string &name, int kind, int64_t sequence, uint64_t thread,
         uint64_t forwardThread) {
        frameworkApi()->enter_op(name.c_str(), kind, sequence, thread, forwardThread);
      },
      nb::arg("name"), nb::arg("kind") = 0, nb::arg("sequence") = -1, nb::arg("thread") = 0,
      nb::arg("forward_thread") = 0,
      "What an operator observer reports through the C table, from Python (for tests).");
  m.def(
      "exit_op", [] { frameworkApi()->exit_op(); }, "The innermost enter_op ends (for tests).");
  m.def(
      "enter_backward", [] { return SessionManager::global().enterBackward(); },
      "The calling thread asks for a backward pass: the framework's worker threads file their "
      "work under its context until exit_backward(token).");
  m.def(
      "exit_backward", [](uint64_t token) { SessionManager::global().exitBackward(token); },
      nb::arg("token"));
  m.def("backwards_in_flight", &backwardsInFlight, "Backward passes published now (for tests).");
  m.def("set_backward_worker_prefixes", &setBackwardWorkerPrefixes, nb::arg("prefixes"),
        "Threads whose OS name starts with one of these run backward passes.");
  m.def("set_module_call_files", &setModuleCallFiles, nb::arg("suffixes"),
        "Files of a framework's module-call machinery: a module frame splices in below the "
        "innermost Python frame outside them.");
  m.def("set_backward_worker", &setBackwardWorker, nb::arg("worker"),
        "Marks the calling thread a backward worker (or not) whatever its name (for tests).");
}

}  // namespace proton::bindings
