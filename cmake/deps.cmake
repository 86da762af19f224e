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
# ak_product_lib(OPTION VAR "name" header library "why" debian-package): a library only the
# product OPTION uses (utf8proc for AK_WITH_LLM, libmicrohttpd for AK_WITH_SERVER). Required
# when OPTION is ON; when it is OFF the build must not link it either, so VAR_INCLUDE and
# VAR_LIB stay empty.
macro(ak_product_lib option var name header library why package)
  if(${option})
    ak_find_lib(${var} "${name}" ${header} ${library} "(${why}, ${option})")
    if(NOT ${var})
      message(FATAL_ERROR "${name} not found: run scripts/setup (Debian package ${package}), "
                          "or configure with -D${option}=OFF")
    endif()
  else()
    set(${var}_INCLUDE "")
    set(${var}_LIB "")
    string(APPEND AK_DEPS_REPORT "  - ${name} (not needed: ${option}=OFF)\n")
  endif()
endmacro()
ak_product_lib(AK_WITH_LLM AK_UTF8PROC "utf8proc" utf8proc.h utf8proc "LLM tokenizers"
               libutf8proc-dev)
# PCRE2 (AK_WITH_LLM), through pkg-config: the regular expressions of the pre-tokenizers
if(AK_WITH_LLM)
  pkg_check_modules(AK_PCRE2 QUIET libpcre2-8)
  ak_dep_report("PCRE2" AK_PCRE2_FOUND "(LLM pre-tokenizers, AK_WITH_LLM)")
  if(NOT AK_PCRE2_FOUND)
    message(FATAL_ERROR "PCRE2 (pkg-config libpcre2-8) not found: run scripts/setup (Debian "
                        "package libpcre2-dev), or configure with -DAK_WITH_LLM=OFF")
  endif()
  set(AK_PCRE2_INCLUDE ${AK_PCRE2_INCLUDE_DIRS})
  set(AK_PCRE2_LIB ${AK_PCRE2_LINK_LIBRARIES})
else()
  set(AK_PCRE2_INCLUDE "")
  set(AK_PCRE2_LIB "")
endif()
ak_product_lib(AK_WITH_SERVER AK_MHD "libmicrohttpd" microhttpd.h microhttpd "LLM server"
               libmicrohttpd-dev)
# GnuTLS (required: the comm product's rendezvous and transports authenticate every
# connection with HMAC-SHA256 over the job secret and draw their nonces from it)
pkg_check_modules(AK_GNUTLS QUIET gnutls)
ak_dep_report("GnuTLS" AK_GNUTLS_FOUND "(comm authentication, required)")
if(NOT AK_GNUTLS_FOUND)
  message(FATAL_ERROR "GnuTLS (pkg-config gnutls) not found: run scripts/setup (Debian package "
                      "libgnutls28-dev)")
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
