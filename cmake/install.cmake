# Install rules: `cmake --install BUILD --prefix P` (or `make install PREFIX=P`) puts
#   bin/ak                                      the command (libaccelkit linked in statically)
#   LIBDIR/libaccelkit.so.MAJOR(.MINOR.PATCH), libaccelkit.so, libaccelkit.a
#   include/accelkit/*.h                        the public headers of the products built,
#                                               with the generated accelkit/version.h
#   LIBDIR/pkgconfig/accelkit.pc                pkg-config
#   LIBDIR/cmake/accelkit/                      find_package(accelkit): accelkit::accelkit
#                                               (shared), accelkit::accelkit_static
#   share/accelkit/plan/{models,clusters}/      the planner's presets, as examples of
#                                               description files (ak has them built in)
#   share/accelkit/python/accelkit/             `ak align`'s Python helper (AK_WITH_LLM)
# `ak` reads no data file at run time: the planner presets are embedded in the library.
include(CMakePackageConfigHelpers)
set(AK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/accelkit)

install(TARGETS accelkit accelkit_static EXPORT accelkitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ak RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# A left-out product's header is not installed, so its functions cannot be called from an
# installed kit by mistake; AK_WITH_* in accelkit/version.h says what the build holds.
file(GLOB AK_PUBLIC_HEADERS ${CMAKE_SOURCE_DIR}/include/accelkit/*.h)
if(NOT AK_WITH_ONNX)
  list(FILTER AK_PUBLIC_HEADERS EXCLUDE REGEX "/infer\\.h$")
endif()
if(NOT AK_WITH_LLM)
  list(FILTER AK_PUBLIC_HEADERS EXCLUDE REGEX "/llm\\.h$")
endif()
install(FILES ${AK_PUBLIC_HEADERS} ${AK_GENERATED_INCLUDE}/accelkit/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/accelkit)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/plan/ DESTINATION ${CMAKE_INSTALL_DATADIR}/accelkit/plan
        FILES_MATCHING PATTERN "*.json")
# `ak align` runs its Python helper from here (src/cli/cmd_align.c looks beside bin/)
if(AK_WITH_LLM)
  install(FILES ${CMAKE_SOURCE_DIR}/python/accelkit/align.py
                ${CMAKE_SOURCE_DIR}/python/accelkit/align_torch.py
                ${CMAKE_SOURCE_DIR}/python/accelkit/llamacpp.py
                ${CMAKE_SOURCE_DIR}/python/accelkit/llm_files.py
          DESTINATION ${CMAKE_INSTALL_DATADIR}/accelkit/python/accelkit)
endif()

# ---- CMake package ------------------------------------------------------------------
install(EXPORT accelkitTargets NAMESPACE accelkit:: DESTINATION ${AK_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/accelkitConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/accelkitConfig.cmake
                              INSTALL_DESTINATION ${AK_CMAKE_DIR})
# 0.x releases may break the interface between minor versions, as the soname does
write_basic_package_version_file(${CMAKE_BINARY_DIR}/accelkitConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/accelkitConfig.cmake
              ${CMAKE_BINARY_DIR}/accelkitConfigVersion.cmake
        DESTINATION ${AK_CMAKE_DIR})

# ---- pkg-config -----------------------------------------------------------------------
# Libs.private: what linking libaccelkit.a into a program adds (`pkg-config --static`);
# a shared link needs none of it. The libraries are named directly rather than through
# their own .pc files (Requires.private), so that `pkg-config --cflags --libs accelkit`
# works where their -dev packages are not installed, and --static does not pull in their
# own static closure (e.g. libmicrohttpd's GnuTLS), which a program linked against the
# shared dependencies does not need.
set(AK_PC_LIBS_PRIVATE -lcjson -lgnutls) # GnuTLS: the comm handshake's HMAC and nonces
if(AK_WITH_LLM)
  list(APPEND AK_PC_LIBS_PRIVATE -lutf8proc -lpcre2-8)
endif()
if(AK_WITH_SERVER)
  list(APPEND AK_PC_LIBS_PRIVATE -lmicrohttpd)
endif()
if(AK_WITH_ONNX)
  list(APPEND AK_PC_LIBS_PRIVATE -lprotobuf-c)
endif()
list(APPEND AK_PC_LIBS_PRIVATE -pthread -lm -ldl)
list(JOIN AK_PC_LIBS_PRIVATE " " AK_PC_LIBS_PRIVATE)
# The prefix is known at install time only (`cmake --install --prefix P` overrides the
# configured one): the file is configured twice, the second time by the install script.
set(AK_PC_PREFIX_REF "@AK_PC_PREFIX@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/accelkit.pc.in ${CMAKE_BINARY_DIR}/accelkit.pc.in @ONLY)
install(CODE "set(AK_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${CMAKE_BINARY_DIR}/accelkit.pc.in\" \"${CMAKE_BINARY_DIR}/accelkit.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/accelkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
