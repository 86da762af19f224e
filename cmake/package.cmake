# The Debian package (`make deb`, or `cpack -G DEB` in the build folder): one package,
# accelkit, holding everything `cmake --install` installs, under /usr. Its Depends are
# computed by dpkg-shlibdeps from what the binaries link (libcjson1, plus libutf8proc2,
# libmicrohttpd12 and libprotobuf-c1 for the products built); without dpkg-shlibdeps
# they are listed from the AK_WITH_* options. Recommends are the -dev packages a link
# against libaccelkit.a needs (accelkit.pc's Libs.private, accelkit::accelkit_static).
set(CPACK_PACKAGE_NAME accelkit)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "AI acceleration kit: CPU kernels, collectives, training, ONNX and LLM inference")
set(CPACK_PACKAGE_CONTACT "accelkit maintainers <accelkit@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # accelkit_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)

set(AK_DEB_RUNTIME libc6 libcjson1 libgnutls30) # GnuTLS: the comm handshake
set(AK_DEB_DEV libcjson-dev libgnutls28-dev pkg-config)
if(AK_WITH_LLM)
  list(APPEND AK_DEB_RUNTIME libutf8proc2 libpcre2-8-0)
  list(APPEND AK_DEB_DEV libutf8proc-dev libpcre2-dev)
endif()
if(AK_WITH_SERVER)
  list(APPEND AK_DEB_RUNTIME libmicrohttpd12)
  list(APPEND AK_DEB_DEV libmicrohttpd-dev)
endif()
if(AK_WITH_ONNX)
  list(APPEND AK_DEB_RUNTIME libprotobuf-c1)
  list(APPEND AK_DEB_DEV libprotobuf-c-dev)
endif()
find_program(AK_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(AK_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  list(JOIN AK_DEB_RUNTIME ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
endif()
list(JOIN AK_DEB_DEV ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
include(CPack)
