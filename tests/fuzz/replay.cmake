# The fuzz targets' replay tests in the ordinary builds (included by tests/CMakeLists.txt):
# each target's harness linked with replay_main.c instead of libFuzzer, run over its seed
# corpus and over tests/fuzz/regress/<target>/ — the inputs of every finding, kept so a
# fixed parser stays fixed (in the release build and under ASan+UBSan in build-san).
# A new fuzz target is added to the list of its product here as well.
set(AK_REPLAY_TARGETS fuzz_convert fuzz_gemm fuzz_parsers fuzz_plan fuzz_comm_tuning
                      fuzz_hostfile)
if(AK_WITH_ONNX)
  list(APPEND AK_REPLAY_TARGETS fuzz_onnx_load fuzz_onnx_session fuzz_tensor_file)
endif()
if(AK_WITH_LLM)
  list(APPEND AK_REPLAY_TARGETS fuzz_gguf fuzz_gguf_model fuzz_jinja fuzz_gbnf fuzz_json_schema
                                fuzz_safetensors fuzz_hf_config fuzz_hf_tokenizer)
endif()
if(AK_WITH_SERVER)
  list(APPEND AK_REPLAY_TARGETS fuzz_oai fuzz_detok)
endif()
set(AK_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
# a new regress/<target>/ folder reconfigures, so its test picks it up
file(GLOB AK_REGRESS_DIRS CONFIGURE_DEPENDS ${AK_FUZZ_DIR}/regress/*)
foreach(name IN LISTS AK_REPLAY_TARGETS)
  add_executable(replay_${name} ${AK_FUZZ_DIR}/${name}.c ${AK_FUZZ_DIR}/replay_main.c)
  target_include_directories(replay_${name} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(replay_${name} PRIVATE AK_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_link_libraries(replay_${name} PRIVATE accelkit_static m)
  set(inputs ${AK_FUZZ_DIR}/corpus/${name})
  if(EXISTS ${AK_FUZZ_DIR}/regress/${name})
    list(APPEND inputs ${AK_FUZZ_DIR}/regress/${name})
  endif()
  add_test(NAME fuzz/replay_${name} COMMAND replay_${name} ${inputs})
  set_tests_properties(fuzz/replay_${name} PROPERTIES TIMEOUT 300)
endforeach()
# the hostfile parser lives in the `ak` command, not the library
if(TARGET replay_fuzz_hostfile)
  target_sources(replay_fuzz_hostfile PRIVATE ${CMAKE_SOURCE_DIR}/src/cli/launch.c)
endif()
