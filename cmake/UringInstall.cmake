# UringInstall: install rules for the libraries, their public headers, the CMake package
# (find_package(uring)), a pkg-config file per library and the Debian package (cpack -G DEB). Included
# from the top-level CMakeLists.txt when URING_INSTALL is on.
include(CMakePackageConfigHelpers)

set(URING_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/uring
    CACHE STRING "Where the CMake package files go, relative to the install prefix")
mark_as_advanced(URING_INSTALL_CMAKEDIR)

set(URING_INSTALLED_TARGETS uring_core uring_http uring_resp)
if(TARGET uring_fiber)
  list(APPEND URING_INSTALLED_TARGETS uring_fiber)
  set(URING_WITH_FIBER ON)  # uringConfig.cmake then finds Boost.Context for uring::fiber
else()
  set(URING_WITH_FIBER OFF)
endif()
if(TARGET uring_tls)
  list(APPEND URING_INSTALLED_TARGETS uring_tls)
  set(URING_WITH_TLS ON)  # uringConfig.cmake then finds OpenSSL for uring::tls
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/tls/include/uring DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp")
else()
  set(URING_WITH_TLS OFF)
endif()
install(TARGETS ${URING_INSTALLED_TARGETS} EXPORT uringTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/uring ${PROJECT_SOURCE_DIR}/protocols/include/uring
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(FILES ${URING_GENERATED_INCLUDE_DIR}/uring/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/uring)

# uring::uring, uring::http, uring::resp (the parsers need neither liburing nor uring::uring), uring::fiber
# and uring::tls.
# The static library links liburing PRIVATE, which the export records as
# $<LINK_ONLY:Liburing::liburing>: uringConfig.cmake defines that target before loading this file.
install(EXPORT uringTargets NAMESPACE uring:: DESTINATION ${URING_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/uringConfig.cmake.in
  ${PROJECT_BINARY_DIR}/uringConfig.cmake
  INSTALL_DESTINATION ${URING_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/uringConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
    ${PROJECT_BINARY_DIR}/uringConfig.cmake
    ${PROJECT_BINARY_DIR}/uringConfigVersion.cmake
    ${PROJECT_SOURCE_DIR}/cmake/FindLiburing.cmake
  DESTINATION ${URING_INSTALL_CMAKEDIR})

# uring.pc. Relocatable: paths are relative to the .pc file's own directory (${pcfiledir}), so the
# tree can be installed with any --prefix or DESTDIR.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(URING_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(URING_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(URING_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH pc_up /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  string(REGEX REPLACE "/$" "" pc_up "${pc_up}")
  set(URING_PC_PREFIX "\${pcfiledir}/${pc_up}")
  set(URING_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(URING_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# One .pc file per library: uring, uring-fiber, uring-tls, uring-http, uring-resp. A static library
# leaves its dependencies' symbols undefined, so every link needs them: they are then public (plain
# `pkg-config --libs uring-tls` must work). A shared library carries its own dependencies and keeps them
# private. Boost.Context has no .pc file of its own: uring-fiber names -lboost_context itself.
get_target_property(uring_core_type uring_core TYPE)
if(uring_core_type STREQUAL "STATIC_LIBRARY")
  set(pc_requires "Requires")
  set(pc_static ON)
else()
  set(pc_requires "Requires.private")
  set(pc_static OFF)
endif()
# uring_pkg_config(<name> <file> <what> REQUIRES <public...> DEPENDS <dependencies...> LIBS <flags...>):
# writes and installs <name>.pc. REQUIRES are always public (our own libraries: their headers are
# included); DEPENDS follow the library type; LIBS are the dependencies without a .pc file of their own.
function(uring_pkg_config name file what)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "REQUIRES;DEPENDS;LIBS")
  set(PC_NAME ${name})
  set(PC_FILE lib${file})
  set(PC_WHAT "${what}")
  set(PC_DESCRIPTION "${PROJECT_DESCRIPTION}: ${what}")
  set(public ${arg_REQUIRES})
  set(private)
  if(pc_static)
    list(APPEND public ${arg_DEPENDS})
  else()
    list(APPEND private ${arg_DEPENDS})
  endif()
  set(lines)
  if(public)
    list(JOIN public ", " text)
    list(APPEND lines "Requires: ${text}")
  endif()
  if(private)
    list(JOIN private ", " text)
    list(APPEND lines "Requires.private: ${text}")
  endif()
  list(JOIN lines "\n" PC_REQUIRES)
  set(libs "-L\${libdir} -l${file}")
  set(PC_LIBS_PRIVATE "")
  if(arg_LIBS AND pc_static)
    list(JOIN arg_LIBS " " extra)
    string(APPEND libs " ${extra}")
  elseif(arg_LIBS)
    list(JOIN arg_LIBS " " extra)
    set(PC_LIBS_PRIVATE "Libs.private: ${extra}")
  endif()
  set(PC_LIBS "${libs}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/uring.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

uring_pkg_config(uring uringcxx "the executor, operations and sockets (uring::uring)"
  DEPENDS "liburing >= ${URING_LIBURING_MIN_VERSION}" LIBS ${CMAKE_THREAD_LIBS_INIT})
uring_pkg_config(uring-http uringcxx_http "the HTTP/1.1 parsers (uring::http)")
uring_pkg_config(uring-resp uringcxx_resp "the RESP parser (uring::resp)")
if(URING_WITH_FIBER)
  uring_pkg_config(uring-fiber uringcxx_fiber "stackful fibers on Boost.Context (uring::fiber)"
    REQUIRES uring LIBS -lboost_context)
endif()
if(URING_WITH_TLS)
  uring_pkg_config(uring-tls uringcxx_tls "TLS streams on OpenSSL 3 (uring::tls)"
    REQUIRES uring DEPENDS "libssl >= ${URING_OPENSSL_MIN_VERSION}" "libcrypto >= ${URING_OPENSSL_MIN_VERSION}")
endif()

# The Debian package: `cpack -G DEB` in the build tree makes liburingcxx-dev_<version>_<arch>.deb with
# everything above under /usr. Its dependencies are the Debian packages of what the libraries link.
set(CPACK_PACKAGE_NAME liburingcxx-dev)
set(CPACK_PACKAGE_VENDOR "uring")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION} (libraries, headers, CMake and pkg-config files)")
set(CPACK_PACKAGE_CONTACT "uring developers <uring@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(uring_deb_depends "liburing-dev (>= ${URING_LIBURING_MIN_VERSION})")
if(URING_WITH_FIBER)
  string(APPEND uring_deb_depends ", libboost-context${URING_BOOST_MIN_VERSION}-dev")
endif()
if(URING_WITH_TLS)
  string(APPEND uring_deb_depends ", libssl-dev (>= ${URING_OPENSSL_MIN_VERSION})")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${uring_deb_depends}")
include(CPack)
