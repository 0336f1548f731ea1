# UringInstall: install rules for the library, its public headers, the CMake package (find_package(uring))
# and the pkg-config file (uring.pc). Included from the top-level CMakeLists.txt when URING_INSTALL is on.
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
# A static liburingcxx.a leaves liburing's symbols undefined: every link needs -luring, so liburing is
# then a public requirement (plain `pkg-config --libs uring` must work). A shared library carries its own
# dependency on liburing.so and keeps it private.
get_target_property(uring_core_type uring_core TYPE)
if(uring_core_type STREQUAL "STATIC_LIBRARY")
  set(URING_PC_REQUIRES "Requires: liburing >= ${URING_LIBURING_MIN_VERSION}")
else()
  set(URING_PC_REQUIRES "Requires.private: liburing >= ${URING_LIBURING_MIN_VERSION}")
endif()
string(STRIP "-L\${libdir} -luringcxx ${CMAKE_THREAD_LIBS_INIT}" URING_PC_LIBS)
configure_file(${PROJECT_SOURCE_DIR}/cmake/uring.pc.in ${PROJECT_BINARY_DIR}/uring.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/uring.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
