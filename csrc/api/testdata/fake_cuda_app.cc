// A stand-in for a CUDA program on machines without a GPU, for the launcher's tests
// (tests/python/test_native_cli.py). It does what the CUDA driver does under
// CUDA_INJECTION64_PATH (dlopen the library, call InitializeInjection at "cuInit"), then uses
// the C++ API the way a real program would. Built there with $(proton --cflags --ldflags).
//
//   fake_cuda_app [nocuda] [self NAME] [exit N | exit_call N | hang]
#include <dlfcn.h>
#include <proton/proton.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// What cuInit does with CUDA_INJECTION64_PATH.
void fakeCuInit() {
  const char *path = std::getenv("CUDA_INJECTION64_PATH");
  if (!path) return;
  void *lib = dlopen(path, RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "fake_cuda_app: %s\n", dlerror());
    std::exit(90);
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (!init || init() != 1) std::exit(91);
}

}  // namespace

int main(int argc, char **argv) {
  bool cuda = true;
  const char *self = nullptr;
  std::string action;
  int code = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "nocuda") {
      cuda = false;
    } else if (arg == "self" && i + 1 < argc) {
      self = argv[++i];
    } else if ((arg == "exit" || arg == "exit_call") && i + 1 < argc) {
      action = arg;
      code = std::atoi(argv[++i]);
    } else {
      action = arg;
    }
  }
  if (self) proton::start(self);  // under the launcher: its session, this name ignored
  PROTON_SCOPE("main");
  if (cuda) fakeCuInit();
  for (int i = 0; i < 3; ++i) {
    PROTON_SCOPE_METRICS("step", {{"flops", 100}, {"bytes", 8}});
  }
  if (action == "hang") {
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  if (action == "exit_call") std::exit(code);
  if (self) proton::finalize();
  return code;
}
