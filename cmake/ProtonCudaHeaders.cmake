# Finds CUPTI's and the CUDA driver's headers (never their libraries) for each CUPTI major
# Proton builds a backend for (12 and 13). Each major's headers come from the first source
# that has them, in this order:
#   1. PROTON_CUDA<major>_INCLUDE_DIRS: explicit include directories for that major;
#   2. a CUDA toolkit, unless PROTON_USE_CUDA_TOOLKIT is OFF: PROTON_CUDA_INCLUDE_DIRS, or
#      $CUDA_HOME, or /usr/local/cuda (include/ and extras/CUPTI/include/); used for the major
#      its cupti_version.h declares;
#   3. NVIDIA's pip wheels under each `nvidia` package root (PROTON_CUDA_WHEEL_ROOTS, or the
#      roots the Python interpreter finds): CUDA 12 in cuda_cupti/, cuda_runtime/, nvtx/ and
#      cuda_nvcc/ (its crt/host_defines.h, which cuda_runtime's device_types.h includes)
#      (nvidia-cuda-cupti-cu12, nvidia-cuda-runtime-cu12, nvidia-nvtx-cu12), CUDA 13 in cu13/
#      (nvidia-cuda-cupti, nvidia-cuda-runtime, nvidia-nvtx >= 13).
# A source is used for a major only when cupti.h and cuda.h both belong to that major. NVTX's
# headers (nvtx3/, header-only and the same for both majors) may come from any source.
# Sets PROTON_CUDA<major>_HEADERS (a list of include directories, empty if not found).

option(PROTON_USE_CUDA_TOOLKIT "Search a CUDA toolkit for CUPTI/CUDA headers" ON)

# The CUDA major of a header: CUPTI 13 numbers its API 130000 and up, CUDA 12's CUPTI used
# small integers (CUPTI_API_VERSION 18..28); cuda.h's CUDA_VERSION is major*1000 + minor*10.
function(proton_header_major file macro out)
  set(${out} 0 PARENT_SCOPE)
  if(NOT EXISTS "${file}")
    return()
  endif()
  file(STRINGS "${file}" line REGEX "#define[ \t]+${macro}[ \t]+[0-9]+")
  string(REGEX MATCH "[0-9]+[ \t]*$" value "${line}")
  string(STRIP "${value}" value)
  if(value STREQUAL "")
    return()
  elseif(macro STREQUAL "CUPTI_API_VERSION")
    if(value GREATER_EQUAL 10000)
      math(EXPR value "${value} / 10000")
    else()
      set(value 12)
    endif()
  else()
    math(EXPR value "${value} / 1000")
  endif()
  set(${out} ${value} PARENT_SCOPE)
endfunction()

# The first directory of `dirs` that holds `file`, or "".
function(proton_first_with file out)
  set(${out} "" PARENT_SCOPE)
  foreach(dir IN LISTS ARGN)
    if(EXISTS "${dir}/${file}")
      set(${out} "${dir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

# Candidate header sources, each a ";"-free string of "|"-separated include directories.
set(_proton_sources "")
if(PROTON_USE_CUDA_TOOLKIT)
  set(_toolkit_dirs ${PROTON_CUDA_INCLUDE_DIRS})
  if(NOT _toolkit_dirs)
    foreach(root "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}" /usr/local/cuda)
      if(NOT root STREQUAL "")
        list(APPEND _toolkit_dirs "${root}/include" "${root}/extras/CUPTI/include")
      endif()
    endforeach()
  endif()
  string(REPLACE ";" "|" _toolkit "${_toolkit_dirs}")
  list(APPEND _proton_sources "${_toolkit}")
endif()
set(_wheel_roots ${PROTON_CUDA_WHEEL_ROOTS})
if(NOT _wheel_roots)
  if(Python_EXECUTABLE)
    set(_py "${Python_EXECUTABLE}")
  else()
    set(_py python3)
  endif()
  execute_process(
    COMMAND "${_py}" -c "import nvidia; print(';'.join(nvidia.__path__))"
    OUTPUT_VARIABLE _wheel_roots OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
foreach(root IN LISTS _wheel_roots)
  list(APPEND _proton_sources "${root}/cu13/include"
    "${root}/cuda_cupti/include|${root}/cuda_runtime/include|${root}/nvtx/include|${root}/cuda_nvcc/include")
endforeach()

set(_proton_crt12_dirs "")
set(_proton_crt13_dirs "")
foreach(root IN LISTS _wheel_roots)
  list(APPEND _proton_crt12_dirs "${root}/cuda_nvcc/include")
  list(APPEND _proton_crt13_dirs "${root}/cu13/include")
endforeach()

set(_nvtx_dirs "")
foreach(source IN LISTS _proton_sources)
  string(REPLACE "|" ";" dirs "${source}")
  list(APPEND _nvtx_dirs ${dirs})
endforeach()
proton_first_with(nvtx3/nvToolsExt.h _proton_nvtx ${_nvtx_dirs})

foreach(major 12 13)
  set(PROTON_CUDA${major}_HEADERS "")
  set(_sources ${_proton_sources})
  if(PROTON_CUDA${major}_INCLUDE_DIRS)
    string(REPLACE ";" "|" explicit "${PROTON_CUDA${major}_INCLUDE_DIRS}")
    list(PREPEND _sources "${explicit}")
  endif()
  foreach(source IN LISTS _sources)
    string(REPLACE "|" ";" dirs "${source}")
    proton_first_with(cupti.h cupti_dir ${dirs})
    proton_first_with(cuda.h cuda_dir ${dirs})
    if(NOT cupti_dir OR NOT cuda_dir)
      continue()
    endif()
    proton_header_major("${cupti_dir}/cupti_version.h" CUPTI_API_VERSION cupti_major)
    proton_header_major("${cuda_dir}/cuda.h" CUDA_VERSION cuda_major)
    if(cupti_major EQUAL major AND cuda_major EQUAL major)
      proton_first_with(nvtx3/nvToolsExt.h nvtx_dir ${dirs})
      if(NOT nvtx_dir)
        set(nvtx_dir "${_proton_nvtx}")
      endif()
      # The runtime headers' crt/: CUDA 12 wheels ship it with nvcc's, CUDA 13 ones in
      # nvidia-cuda-crt, which may sit under another `nvidia` root than cupti.h (a build
      # requirement next to PyTorch's wheels): then any root's cu13/include serves.
      proton_first_with(crt/host_defines.h crt_dir ${dirs})
      if(NOT crt_dir)
        proton_first_with(crt/host_defines.h crt_dir ${_proton_crt${major}_dirs})
      endif()
      if(nvtx_dir)
        set(PROTON_CUDA${major}_HEADERS ${cupti_dir} ${cuda_dir} ${nvtx_dir} ${crt_dir})
        list(REMOVE_DUPLICATES PROTON_CUDA${major}_HEADERS)
        break()
      endif()
    endif()
  endforeach()
endforeach()
