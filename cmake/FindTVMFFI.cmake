# FindTVMFFI.cmake: locates TVM-FFI (the apache-tvm-ffi Python wheel) for the benchmarks:
# its C/C++ headers, bundled dlpack.h and libtvm_ffi, as the imported target TVMFFI::tvm_ffi.
#
# Input:
#   PF_PYTHON          Python interpreter whose environment has apache-tvm-ffi installed, e.g.
#                      BUILD/venv/bin/python after
#                        python3 -m venv BUILD/venv && BUILD/venv/bin/pip install apache-tvm-ffi
#                      Defaults to Python3_EXECUTABLE, then to python3 on PATH.
#   TVMFFI_INCLUDE_DIR, TVMFFI_LIBRARY (cache) may be set by hand instead.
# Output:
#   TVMFFI_FOUND, TVMFFI_VERSION (the wheel's version), TVMFFI_INCLUDE_DIRS, TVMFFI_LIBRARIES,
#   imported target TVMFFI::tvm_ffi (C++17 headers, libtvm_ffi.so).
# Absent wheel: TVMFFI_FOUND is FALSE and nothing fails unless find_package(... REQUIRED).

set(_tvmffi_python "${PF_PYTHON}")
if(NOT _tvmffi_python AND Python3_EXECUTABLE)
  set(_tvmffi_python "${Python3_EXECUTABLE}")
endif()
if(NOT _tvmffi_python)
  find_program(TVMFFI_PYTHON_EXECUTABLE NAMES python3 python)
  mark_as_advanced(TVMFFI_PYTHON_EXECUTABLE)
  set(_tvmffi_python "${TVMFFI_PYTHON_EXECUTABLE}")
endif()

# Another interpreter means another wheel: forget the paths found through the previous one.
if(DEFINED TVMFFI_PYTHON_USED AND NOT "${TVMFFI_PYTHON_USED}" STREQUAL "${_tvmffi_python}")
  unset(TVMFFI_INCLUDE_DIR CACHE)
  unset(TVMFFI_DLPACK_INCLUDE_DIR CACHE)
  unset(TVMFFI_LIBRARY CACHE)
endif()
set(TVMFFI_PYTHON_USED
    "${_tvmffi_python}"
    CACHE INTERNAL "Interpreter FindTVMFFI asked last")

# Ask the wheel itself: `python -m tvm_ffi.config` prints its own paths (since 0.1.0).
function(_tvmffi_query flag out_var)
  set(${out_var} "" PARENT_SCOPE)
  if(NOT _tvmffi_python)
    return()
  endif()
  execute_process(
    COMMAND "${_tvmffi_python}" -m tvm_ffi.config ${flag}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0)
    set(${out_var} "${out}" PARENT_SCOPE)
  endif()
endfunction()

_tvmffi_query(--includedir _tvmffi_includedir)
_tvmffi_query(--dlpack-includedir _tvmffi_dlpack_includedir)
_tvmffi_query(--libdir _tvmffi_libdir)

if(_tvmffi_python)
  execute_process(
    COMMAND "${_tvmffi_python}" -c
            "import importlib.metadata as m; print(m.version('apache-tvm-ffi'))"
    RESULT_VARIABLE _tvmffi_rc
    OUTPUT_VARIABLE _tvmffi_version
    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_tvmffi_rc EQUAL 0)
    set(TVMFFI_VERSION "${_tvmffi_version}")
  endif()
endif()

find_path(
  TVMFFI_INCLUDE_DIR
  NAMES tvm/ffi/c_api.h
  HINTS ${_tvmffi_includedir}
  NO_DEFAULT_PATH)
find_path(
  TVMFFI_DLPACK_INCLUDE_DIR
  NAMES dlpack/dlpack.h
  HINTS ${_tvmffi_dlpack_includedir} ${TVMFFI_INCLUDE_DIR}
  NO_DEFAULT_PATH)
find_library(
  TVMFFI_LIBRARY
  NAMES tvm_ffi
  HINTS ${_tvmffi_libdir}
  NO_DEFAULT_PATH)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(
  TVMFFI
  REQUIRED_VARS TVMFFI_LIBRARY TVMFFI_INCLUDE_DIR TVMFFI_DLPACK_INCLUDE_DIR
  VERSION_VAR TVMFFI_VERSION)

if(TVMFFI_FOUND)
  set(TVMFFI_INCLUDE_DIRS "${TVMFFI_INCLUDE_DIR}" "${TVMFFI_DLPACK_INCLUDE_DIR}")
  list(REMOVE_DUPLICATES TVMFFI_INCLUDE_DIRS)
  set(TVMFFI_LIBRARIES "${TVMFFI_LIBRARY}")
  if(NOT TARGET TVMFFI::tvm_ffi)
    add_library(TVMFFI::tvm_ffi SHARED IMPORTED)
    set_target_properties(
      TVMFFI::tvm_ffi
      PROPERTIES IMPORTED_LOCATION "${TVMFFI_LIBRARY}"
                 INTERFACE_INCLUDE_DIRECTORIES "${TVMFFI_INCLUDE_DIRS}"
                 INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${TVMFFI_INCLUDE_DIRS}"
                 INTERFACE_COMPILE_FEATURES cxx_std_17)
  endif()
endif()

mark_as_advanced(TVMFFI_INCLUDE_DIR TVMFFI_DLPACK_INCLUDE_DIR TVMFFI_LIBRARY)
unset(_tvmffi_includedir)
unset(_tvmffi_dlpack_includedir)
unset(_tvmffi_libdir)
unset(_tvmffi_python)
