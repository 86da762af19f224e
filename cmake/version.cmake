# Generates accelkit/version.h (the version from project(VERSION), the AK_WITH_* switches)
# into the build tree's include folder; cmake/install.cmake installs it with the headers.
set(AK_GENERATED_INCLUDE ${CMAKE_BINARY_DIR}/include)
foreach(product ONNX LLM SERVER)
  if(AK_WITH_${product})
    set(AK_WITH_${product}_01 1)
  else()
    set(AK_WITH_${product}_01 0)
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in
               ${AK_GENERATED_INCLUDE}/accelkit/version.h @ONLY)
