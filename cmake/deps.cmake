# Finds the optional dependencies and prints a ✓/✗ list; accelkit builds without them.
find_package(PkgConfig QUIET)

set(AK_DEPS_REPORT "")
macro(ak_dep_report name found detail)
  if(${found})
    string(APPEND AK_DEPS_REPORT "  ✓ ${name} ${detail}\n")
  else()
    string(APPEND AK_DEPS_REPORT "  ✗ ${name} ${detail}\n")
  endif()
endmacro()

# cmocka: required for the unit tests only
find_path(AK_CMOCKA_INCLUDE cmocka.h)
find_library(AK_CMOCKA_LIB cmocka)
if(AK_CMOCKA_INCLUDE AND AK_CMOCKA_LIB)
  set(AK_HAVE_CMOCKA TRUE)
else()
  set(AK_HAVE_CMOCKA FALSE)
endif()
ak_dep_report("cmocka" AK_HAVE_CMOCKA "(unit tests)")

# OpenBLAS / BLIS: peers for the SGEMM benchmark, later optional inference backends
find_path(AK_OPENBLAS_INCLUDE cblas.h PATHS /usr/include/x86_64-linux-gnu/openblas-pthread
          NO_DEFAULT_PATH)
find_library(AK_OPENBLAS_LIB openblas)
if(AK_OPENBLAS_INCLUDE AND AK_OPENBLAS_LIB)
  set(AK_HAVE_OPENBLAS TRUE)
else()
  set(AK_HAVE_OPENBLAS FALSE)
endif()
ak_dep_report("OpenBLAS" AK_HAVE_OPENBLAS "(SGEMM peer)")

find_path(AK_BLIS_INCLUDE blis.h PATH_SUFFIXES blis)
find_library(AK_BLIS_LIB blis)
if(AK_BLIS_INCLUDE AND AK_BLIS_LIB)
  set(AK_HAVE_BLIS TRUE)
else()
  set(AK_HAVE_BLIS FALSE)
endif()
ak_dep_report("BLIS" AK_HAVE_BLIS "(SGEMM peer)")

find_path(AK_DNNL_INCLUDE dnnl.h)
find_library(AK_DNNL_LIB dnnl)
if(AK_DNNL_INCLUDE AND AK_DNNL_LIB)
  set(AK_HAVE_DNNL TRUE)
else()
  set(AK_HAVE_DNNL FALSE)
endif()
ak_dep_report("oneDNN" AK_HAVE_DNNL "(inference backend, optional)")

find_package(MPI QUIET COMPONENTS C)
ak_dep_report("Open MPI" MPI_C_FOUND "(collectives peer, optional)")

find_path(AK_PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
if(AK_PROTOBUF_C_INCLUDE)
  set(AK_HAVE_PROTOBUF_C TRUE)
else()
  set(AK_HAVE_PROTOBUF_C FALSE)
endif()
ak_dep_report("protobuf-c" AK_HAVE_PROTOBUF_C "(ONNX loader, optional)")

# Debian's python3 carries python3-torch/numpy; prefer it over any other interpreter.
if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 QUIET COMPONENTS Interpreter)
ak_dep_report("Python 3" Python3_FOUND "(python package tests) ${Python3_EXECUTABLE}")

message(STATUS "accelkit optional dependencies:\n${AK_DEPS_REPORT}")
