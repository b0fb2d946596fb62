// proton._C: the private extension module. The Python package re-exports a curated API.
#include "bindings/common.h"

NB_MODULE(_C, m) {
  m.doc() = "Proton's C++ core (private; use the proton package)";
  proton::bindings::registerErrors(m);
  proton::bindings::bindSession(m);
  proton::bindings::bindScope(m);
  proton::bindings::bindData(m);
  proton::bindings::bindContext(m);
  proton::bindings::bindViewer(m);
  proton::bindings::bindInstrumentation(m);
  proton::bindings::bindFramework(m);
  proton::bindings::bindModuleEvents(m);
  m.attr("__version__") = PROTON_VERSION;
}
