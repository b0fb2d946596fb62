# CMake config package for Proton's C/C++ host API, installed inside the Python package at
# <site-packages>/proton/lib/cmake/proton. Use:
#   cmake -Dproton_DIR=$(proton --cmake-dir) ...      (or CMAKE_PREFIX_PATH=$(proton --prefix))
#   find_package(proton CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE proton::proton)
# The imported target carries the include directory (proton/proton.h) and an RPATH to the
# package's libprotonprof.so, the same library `proton ./app` injects and `import proton` loads.
get_filename_component(_proton_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET proton::proton)
  add_library(proton::proton SHARED IMPORTED)
  set_target_properties(proton::proton PROPERTIES
    IMPORTED_LOCATION "${_proton_prefix}/lib/libprotonprof.so"
    IMPORTED_SONAME "libprotonprof.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_proton_prefix}/include")
endif()
set(proton_INCLUDE_DIRS "${_proton_prefix}/include")
set(proton_LIBRARIES proton::proton)
set(proton_FOUND TRUE)
unset(_proton_prefix)
