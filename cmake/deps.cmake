# Finds the dependencies and prints a ✓/✗ list: cJSON always; utf8proc, libmicrohttpd and
# protobuf-c for the products that need them (AK_WITH_*); the rest (test and benchmark
# peers) are optional.
find_package(PkgConfig QUIET)

set(AK_DEPS_REPORT "")
macro(ak_dep_report name found detail)
  if(${found})
    string(APPEND AK_DEPS_REPORT "  ✓ ${name} ${detail}\n")
  else()
    string(APPEND AK_DEPS_REPORT "  ✗ ${name} ${detail}\n")
  endif()
endmacro()

# ak_find_lib(VAR "name" header library "why" [find_path options...]): sets VAR to TRUE
# when both the header and the library are found, with VAR_INCLUDE and VAR_LIB.
macro(ak_find_lib var name header library why)
  find_path(${var}_INCLUDE ${header} ${ARGN})
  find_library(${var}_LIB ${library})
  if(${var}_INCLUDE AND ${var}_LIB)
    set(${var} TRUE)
  else()
    set(${var} FALSE)
  endif()
  ak_dep_report("${name}" ${var} "${why}")
endmacro()

ak_find_lib(AK_CJSON "cJSON" cjson/cJSON.h cjson "(planner descriptions, required)")
if(NOT AK_CJSON)
  message(FATAL_ERROR "cJSON not found: run scripts/setup (Debian package libcjson-dev)")
endif()
# utf8proc and libmicrohttpd only for the products that use them (AK_WITH_LLM,
# AK_WITH_SERVER); a build without them must not link them either, so their variables stay
# empty then.
if(AK_WITH_LLM)
  ak_find_lib(AK_UTF8PROC "utf8proc" utf8proc.h utf8proc "(LLM tokenizers, AK_WITH_LLM)")
  if(NOT AK_UTF8PROC)
    message(FATAL_ERROR "utf8proc not found: run scripts/setup (Debian package libutf8proc-dev), "
                        "or configure with -DAK_WITH_LLM=OFF")
  endif()
else()
  set(AK_UTF8PROC_INCLUDE "")
  set(AK_UTF8PROC_LIB "")
  string(APPEND AK_DEPS_REPORT "  - utf8proc (not needed: AK_WITH_LLM=OFF)\n")
endif()
if(AK_WITH_SERVER)
  ak_find_lib(AK_MHD "libmicrohttpd" microhttpd.h microhttpd "(LLM server, AK_WITH_SERVER)")
  if(NOT AK_MHD)
    message(FATAL_ERROR "libmicrohttpd not found: run scripts/setup (Debian package "
                        "libmicrohttpd-dev), or configure with -DAK_WITH_SERVER=OFF")
  endif()
else()
  set(AK_MHD_INCLUDE "")
  set(AK_MHD_LIB "")
  string(APPEND AK_DEPS_REPORT "  - libmicrohttpd (not needed: AK_WITH_SERVER=OFF)\n")
endif()
ak_find_lib(AK_HAVE_CMOCKA "cmocka" cmocka.h cmocka "(unit tests)")
# OpenBLAS / BLIS: peers for the SGEMM benchmark, later optional inference backends
ak_find_lib(AK_HAVE_OPENBLAS "OpenBLAS" cblas.h openblas "(SGEMM peer)"
            PATHS /usr/include/x86_64-linux-gnu/openblas-pthread NO_DEFAULT_PATH)
ak_find_lib(AK_HAVE_BLIS "BLIS" blis.h blis "(SGEMM peer)" PATH_SUFFIXES blis)
ak_find_lib(AK_HAVE_DNNL "oneDNN" dnnl.h dnnl "(inference backend, optional)")

find_package(MPI QUIET COMPONENTS C)
ak_dep_report("Open MPI" MPI_C_FOUND "(collectives peer, optional)")

if(AK_WITH_ONNX)
  ak_find_lib(AK_HAVE_PROTOBUF_C "protobuf-c" protobuf-c/protobuf-c.h protobuf-c
              "(ONNX loader, AK_WITH_ONNX)")
else()
  string(APPEND AK_DEPS_REPORT "  - protobuf-c (not needed: AK_WITH_ONNX=OFF)\n")
endif()

# Debian's python3 carries python3-torch/numpy; prefer it over any other interpreter.
if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 QUIET COMPONENTS Interpreter)
ak_dep_report("Python 3" Python3_FOUND "(python package tests) ${Python3_EXECUTABLE}")

message(STATUS "accelkit optional dependencies:\n${AK_DEPS_REPORT}")
