# Inference: the ONNX loader, the graph IR, the runtime and the operators. Included by the
# root CMakeLists.txt after accelkit_obj exists, when AK_WITH_ONNX is ON. Compiles
# src/infer/onnx/onnx.proto with protoc-c into the build directory and adds every .c under
# src/infer plus the generated decoder
# to the library. protobuf-c is required (Debian: protobuf-c-compiler, libprotobuf-c-dev).

find_program(AK_PROTOC_C protoc-c)
# deps.cmake already looked for the runtime (AK_HAVE_PROTOBUF_C_*); look again only if not
find_path(AK_HAVE_PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
find_library(AK_HAVE_PROTOBUF_C_LIB protobuf-c)
if(NOT AK_PROTOC_C OR NOT AK_HAVE_PROTOBUF_C_INCLUDE OR NOT AK_HAVE_PROTOBUF_C_LIB)
  message(FATAL_ERROR "protobuf-c not found (the ONNX loader needs it): run scripts/setup "
                      "(Debian packages protobuf-c-compiler and libprotobuf-c-dev)")
endif()

set(AK_INFER_GEN_DIR ${CMAKE_BINARY_DIR}/generated/infer)
set(AK_ONNX_PROTO ${CMAKE_SOURCE_DIR}/src/infer/onnx/onnx.proto)
set(AK_ONNX_PB_C ${AK_INFER_GEN_DIR}/onnx.pb-c.c)
set(AK_ONNX_PB_H ${AK_INFER_GEN_DIR}/onnx.pb-c.h)
file(MAKE_DIRECTORY ${AK_INFER_GEN_DIR})
add_custom_command(
  OUTPUT ${AK_ONNX_PB_C} ${AK_ONNX_PB_H}
  COMMAND ${AK_PROTOC_C} --proto_path=${CMAKE_SOURCE_DIR}/src/infer/onnx
          --c_out=${AK_INFER_GEN_DIR} ${AK_ONNX_PROTO}
  DEPENDS ${AK_ONNX_PROTO}
  COMMENT "protoc-c: src/infer/onnx/onnx.proto"
  VERBATIM)
# generated code is not ours to keep warning-clean
set_source_files_properties(${AK_ONNX_PB_C} PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-w")

file(GLOB_RECURSE AK_INFER_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/infer/*.c)
# Conv's epilogues and column packing need -O3: GCC 12 at -O2 only vectorizes loops
# without a remainder, and its scalar Relu branches on every sign (half the time of a
# 1×1 convolution went there). Not all the operators: -O3 made the depthwise loops slower.
# The int8 convolutions' input rewrite (quant/qconv_direct.c) and QuantizeLinear's loop
# (quant/qdq.c), the QDQ residual add (quant/qadd.c) and the int8 products' epilogue
# (quant/qmm.c) likewise: they stay scalar at -O2.
foreach(src IN LISTS AK_INFER_SOURCES)
  if(src MATCHES "/ops/(nn/(conv/(conv|activation|igemm|winograd|nchwc)|pool/pool)|quant/(qconv_direct|qdq|qadd|qmm))\\.c$")
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-O3")
  endif()
endforeach()
target_sources(accelkit_obj PRIVATE ${AK_INFER_SOURCES} ${AK_ONNX_PB_C} ${AK_ONNX_PB_H})
target_include_directories(accelkit_obj PRIVATE ${CMAKE_BINARY_DIR}/generated
                                                ${AK_HAVE_PROTOBUF_C_INCLUDE})

# accelkit, accelkit_static, ak and the tests are defined after this file is included,
# so what refers to them is added once the directory is fully read. The generated header is exported to
# in-tree users of the static library (the tests build models with it).
set(AK_INFER_LIBS ${AK_HAVE_PROTOBUF_C_LIB})
function(ak_infer_link_libraries)
  foreach(t accelkit accelkit_static)
    target_link_libraries(${t} PRIVATE ${AK_INFER_LIBS})
  endforeach()
  # build tree only: an installed library's users see the public headers alone
  target_include_directories(accelkit_static PUBLIC
    $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/generated>
    $<BUILD_INTERFACE:${AK_HAVE_PROTOBUF_C_INCLUDE}>)
  # `ak info` end to end (the C tests are found by tests/CMakeLists.txt's glob)
  if(AK_BUILD_TESTS AND TARGET ak)
    add_test(NAME infer/test_info COMMAND ${CMAKE_SOURCE_DIR}/tests/infer/test_info.sh
             $<TARGET_FILE:ak>)
    set_tests_properties(infer/test_info PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  endif()
  # the INT8 operators against ONNX Runtime (onnxruntime-node) on models built with
  # python3-onnx (~2 s; release tree only)
  if(AK_BUILD_TESTS AND TARGET ak AND NOT AK_SANITIZE)
    add_test(NAME infer/test_quant_ort COMMAND /usr/bin/python3
             ${CMAKE_SOURCE_DIR}/tests/infer/test_quant_ort.py $<TARGET_FILE:ak>)
    set_tests_properties(infer/test_quant_ort PROPERTIES TIMEOUT 300)
  endif()
  # `ak quantize`: static QDQ and dynamic files against ONNX Runtime and the float model,
  # the QDQ chains fused, refusals (~1 s; release tree only)
  if(AK_BUILD_TESTS AND TARGET ak AND NOT AK_SANITIZE)
    add_test(NAME infer/test_quantize_ort COMMAND /usr/bin/python3
             ${CMAKE_SOURCE_DIR}/tests/infer/test_quantize_ort.py $<TARGET_FILE:ak>)
    set_tests_properties(infer/test_quantize_ort PROPERTIES TIMEOUT 300)
  endif()
  # `ak optimize`: basic files against ONNX Runtime, basic and extended files reloaded by
  # accelkit, on models built with python3-onnx (~1.5 s; release tree only)
  if(AK_BUILD_TESTS AND TARGET ak AND NOT AK_SANITIZE)
    add_test(NAME infer/test_optimize_ort COMMAND /usr/bin/python3
             ${CMAKE_SOURCE_DIR}/tests/infer/test_optimize_ort.py $<TARGET_FILE:ak>)
    set_tests_properties(infer/test_optimize_ort PROPERTIES TIMEOUT 300)
  endif()
  # the extended optimizer's fusions (norms, GELU, Gemm) in several exported forms each,
  # against the unoptimized session and ONNX Runtime (onnxruntime-node) (~7 s)
  if(AK_BUILD_TESTS AND TARGET ak AND NOT AK_SANITIZE)
    add_test(NAME infer/test_fusion_forms COMMAND /usr/bin/python3
             ${CMAKE_SOURCE_DIR}/tests/infer/test_fusion_forms.py)
    # own kernels only: the fused and the unfused graph are compared to 1e-5, which holds
    # for one GEMM; a library chosen for the fused node (infer/backends) sums otherwise
    set_tests_properties(infer/test_fusion_forms PROPERTIES TIMEOUT 120 ENVIRONMENT
      "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;AK_LIBRARY=$<TARGET_FILE:accelkit>;AK_INFER_BACKENDS=own")
  endif()
  # com.microsoft Attention/MultiHeadAttention and the attention fusion against ONNX
  # Runtime (onnxruntime-node), torch.onnx exports and a small BERT (release tree only)
  if(AK_BUILD_TESTS AND TARGET ak AND NOT AK_SANITIZE)
    add_test(NAME infer/test_attention_ort COMMAND /usr/bin/python3 -m unittest -v test_attention_ort
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/tests/infer)
    set_tests_properties(infer/test_attention_ort PROPERTIES TIMEOUT 300 ENVIRONMENT
      "PYTHONPATH=${CMAKE_SOURCE_DIR}/python;AK_LIBRARY=$<TARGET_FILE:accelkit>")
  endif()
  # the ONNX backend suites of Debian's libonnx-testdata against an expected-pass list
  if(AK_BUILD_TESTS)
    add_executable(onnx_conformance ${CMAKE_SOURCE_DIR}/tests/infer/onnx_conformance.c)
    target_link_libraries(onnx_conformance PRIVATE accelkit_static m)
    # the registry's family tables (src/infer/runtime/op.h) name the per-family pass rates
    target_include_directories(onnx_conformance PRIVATE ${CMAKE_SOURCE_DIR}/src)
    set_target_properties(onnx_conformance PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                                      ${CMAKE_BINARY_DIR}/tests)
    add_test(NAME infer/onnx_conformance
             COMMAND onnx_conformance --quiet --expected
                     ${CMAKE_SOURCE_DIR}/tests/infer/conformance_expected.txt)
    set_tests_properties(infer/onnx_conformance PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
    # the same suite on the scalar reference kernels (AK_KERNELS=ref: every kernel of the
    # ONNX engine's block of kernels/kernels.def and the SGEMM reference)
    add_test(NAME infer/onnx_conformance_ref
             COMMAND onnx_conformance --quiet --expected
                     ${CMAKE_SOURCE_DIR}/tests/infer/conformance_expected.txt)
    set_tests_properties(infer/onnx_conformance_ref PROPERTIES TIMEOUT 300
                         SKIP_RETURN_CODE 77 ENVIRONMENT AK_KERNELS=ref)
  endif()
endfunction()
cmake_language(DEFER CALL ak_infer_link_libraries)
