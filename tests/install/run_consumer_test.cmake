# run_consumer_test.cmake: the install_consumer test, run with `cmake -P` (see tests/CMakeLists.txt).
#
# Installs the already-built tree into a scratch prefix (with PACKAGE: makes the Debian package with
# cpack and unpacks it there, its /usr the prefix), then builds tests/install/consumer against it twice,
# each build run once:
#   1. as a CMake project: find_package(uring REQUIRED) + uring::uring, with the parent's C++ compiler;
#   2. by hand: <c++> -std=c++20 main.cpp $(pkg-config --cflags --libs uring), and likewise each other
#      library's program with its own .pc file (uring-http uring-resp, uring-fiber, uring-tls).
# Every path comes in as an absolute -D definition, so the working directory does not matter. With a
# sanitized library (URING_SANITIZE) both builds add the same -fsanitize flags, which its code needs.
#
# Inputs (-D): BUILD_DIR, CONFIG, WORK_DIR, CONSUMER_SOURCE_DIR, CXX_COMPILER, GENERATOR, MAKE_PROGRAM,
# INSTALL_LIBDIR, EXPECTED_VERSION, PKG_CONFIG_EXECUTABLE (may be empty: the pkg-config half then fails),
# SANITIZE_COMPILE_FLAGS and SANITIZE_LINK_FLAGS (space-separated, may be empty), EXPECT_FIBER (ON when
# uring::fiber was built: the package must provide it), EXPECT_TLS (likewise for uring::tls, asked for as
# find_package(uring COMPONENTS tls)).
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR CXX_COMPILER GENERATOR INSTALL_LIBDIR EXPECTED_VERSION)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_consumer: -D${var}=... is required")
  endif()
endforeach()
separate_arguments(sanitize_compile UNIX_COMMAND "${SANITIZE_COMPILE_FLAGS}")
separate_arguments(sanitize_link UNIX_COMMAND "${SANITIZE_LINK_FLAGS}")

# run_step(<what> <output_var> COMMAND ...): runs the command, stdout and stderr together into
# <output_var>; stops the test with the command line and all its output when it exits non-zero.
function(run_step what output_var)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "COMMAND")
  list(JOIN arg_COMMAND " " command_line)
  message(STATUS "install_consumer: ${what}: ${command_line}")
  execute_process(COMMAND ${arg_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc STREQUAL "0")
    # NOTICE prints the output verbatim (FATAL_ERROR would re-wrap it), then the error stops the test.
    message(NOTICE "----- output of: ${command_line}\n${out}----- end of output")
    message(FATAL_ERROR "install_consumer: ${what} FAILED (exit ${rc}): ${command_line}")
  endif()
  set(${output_var} "${out}" PARENT_SCOPE)
endfunction()

function(expect_in what haystack needle)
  string(FIND "${haystack}" "${needle}" pos)
  if(pos EQUAL -1)
    message(NOTICE "----- output\n${haystack}----- end of output")
    message(FATAL_ERROR "install_consumer: ${what}: expected \"${needle}\" in the output above")
  endif()
endfunction()

# find_consumer_program(<name> <output_var>): the program <name> the consumer build made, at
# <build>/<name> or <build>/<Config>/<name>.
function(find_consumer_program name output_var)
  file(GLOB_RECURSE found ${consumer_build}/${name})
  if(NOT found)
    message(FATAL_ERROR "install_consumer: the consumer build produced no '${name}' under ${consumer_build}")
  endif()
  list(GET found 0 found)
  set(${output_var} ${found} PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
unset(ENV{DESTDIR})  # the scratch prefix must be exactly where the files land

# 0. Install, or package and unpack.
set(config_args)
if(CONFIG)
  set(config_args --config ${CONFIG})
endif()
if(PACKAGE)
  set(cpack_args)
  if(CONFIG)
    set(cpack_args -C ${CONFIG})
  endif()
  run_step("cpack" out COMMAND ${CPACK_COMMAND} -G DEB --config ${BUILD_DIR}/CPackConfig.cmake
                                -B ${WORK_DIR}/package ${cpack_args})
  file(GLOB deb ${WORK_DIR}/package/*.deb)
  if(NOT deb)
    message(FATAL_ERROR "install_consumer: cpack made no .deb under ${WORK_DIR}/package:\n${out}")
  endif()
  run_step("dpkg-deb --field" out COMMAND dpkg-deb --field ${deb} Package Version Depends)
  expect_in("the package's control fields" "${out}" "Package: liburingcxx-dev")
  expect_in("the package's control fields" "${out}" "Version: ${EXPECTED_VERSION}")
  expect_in("the package's control fields" "${out}" "liburing-dev (>= ")
  run_step("dpkg-deb --extract" out COMMAND dpkg-deb --extract ${deb} ${WORK_DIR}/root)
  set(prefix ${WORK_DIR}/root/usr)
else()
  set(prefix ${WORK_DIR}/prefix)
  run_step("install" out COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_args})
endif()
foreach(file
    include/uring/uring.hpp include/uring/version.hpp include/uring/detail/operation.hpp
    include/uring/http/parser.hpp include/uring/resp/parser.hpp include/uring/protocol/input_buffer.hpp
    ${INSTALL_LIBDIR}/liburingcxx.a ${INSTALL_LIBDIR}/liburingcxx_http.a ${INSTALL_LIBDIR}/liburingcxx_resp.a
    ${INSTALL_LIBDIR}/cmake/uring/uringConfig.cmake ${INSTALL_LIBDIR}/cmake/uring/uringConfigVersion.cmake
    ${INSTALL_LIBDIR}/cmake/uring/uringTargets.cmake ${INSTALL_LIBDIR}/cmake/uring/FindLiburing.cmake
    ${INSTALL_LIBDIR}/pkgconfig/uring.pc)
  if(NOT EXISTS ${prefix}/${file})
    string(REGEX REPLACE "\\.a$" ".so" shared_file "${file}")
    if(file MATCHES "\\.a$" AND EXISTS ${prefix}/${shared_file})
      continue()  # a BUILD_SHARED_LIBS build
    endif()
    file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
    list(JOIN installed "\n  " installed)
    message(FATAL_ERROR "install_consumer: ${prefix}/${file} was not installed; installed:\n  ${installed}")
  endif()
endforeach()

# 1. find_package(uring) from a CMake project.
set(consumer_build ${WORK_DIR}/cmake-build)
set(configure_args -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DCONSUMER_COMPILE_OPTIONS=${SANITIZE_COMPILE_FLAGS}"
    "-DCONSUMER_LINK_OPTIONS=${SANITIZE_LINK_FLAGS}")
if(EXPECT_TLS)
  list(APPEND configure_args -DCONSUMER_TLS=ON)
endif()
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CONFIG)
  list(APPEND configure_args -DCMAKE_BUILD_TYPE=${CONFIG})
endif()
run_step("configure consumer (find_package)" out COMMAND ${CMAKE_COMMAND} ${configure_args})
# The package must come from the scratch prefix, not from some uring installed on this machine.
expect_in("configure consumer (find_package)" "${out}" "consumer: uring ${EXPECTED_VERSION} from ${prefix}/")
run_step("build consumer (find_package)" out COMMAND ${CMAKE_COMMAND} --build ${consumer_build} ${config_args})
find_consumer_program(consumer consumer_exe)
run_step("run consumer (find_package)" out COMMAND ${consumer_exe})
expect_in("run consumer (find_package)" "${out}" "consumer: uring ${EXPECTED_VERSION} ")
expect_in("run consumer (find_package)" "${out}" "consumer: round trip ok")
find_consumer_program(parsers_consumer parsers_exe)
run_step("run parsers_consumer (find_package)" parsers_out COMMAND ${parsers_exe})
expect_in("run parsers_consumer (find_package)" "${parsers_out}" "consumer: parsers ok")
message(STATUS "install_consumer: find_package consumer passed:\n${out}${parsers_out}")
# The fiber library, when the tree built it (EXPECT_FIBER): uring::fiber must come with the package.
if(EXPECT_FIBER)
  find_consumer_program(fiber_consumer fiber_exe)
  run_step("run fiber consumer (find_package)" out COMMAND ${fiber_exe})
  expect_in("run fiber consumer (find_package)" "${out}" "fiber consumer: ok")
endif()
# The TLS library likewise (EXPECT_TLS), found as a component.
if(EXPECT_TLS)
  find_consumer_program(tls_consumer tls_exe)
  run_step("run tls consumer (find_package COMPONENTS tls)" out COMMAND ${tls_exe})
  expect_in("run tls consumer (find_package COMPONENTS tls)" "${out}" "tls consumer: ok")
endif()

# 2. pkg-config: the flags it prints must be all a plain compiler command needs, with -std=c++20 our own.
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "install_consumer: pkg-config not found: cannot check uring.pc")
endif()
if(DEFINED ENV{PKG_CONFIG_PATH} AND NOT "$ENV{PKG_CONFIG_PATH}" STREQUAL "")
  set(ENV{PKG_CONFIG_PATH} "${prefix}/${INSTALL_LIBDIR}/pkgconfig:$ENV{PKG_CONFIG_PATH}")
else()
  set(ENV{PKG_CONFIG_PATH} "${prefix}/${INSTALL_LIBDIR}/pkgconfig")
endif()
run_step("pkg-config --modversion uring" out COMMAND ${PKG_CONFIG_EXECUTABLE} --modversion uring)
string(STRIP "${out}" pc_version)
if(NOT pc_version STREQUAL EXPECTED_VERSION)
  message(FATAL_ERROR "install_consumer: uring.pc says version '${pc_version}', expected '${EXPECTED_VERSION}'")
endif()
run_step("pkg-config --cflags --libs uring" out COMMAND ${PKG_CONFIG_EXECUTABLE} --cflags --libs uring)
string(STRIP "${out}" pc_flags_text)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags_text}")
set(pc_exe ${WORK_DIR}/pkgconfig-consumer)
run_step("build consumer (pkg-config)" out
  COMMAND ${CXX_COMPILER} -std=c++20 ${sanitize_compile} ${CONSUMER_SOURCE_DIR}/main.cpp -o ${pc_exe}
          ${pc_flags} ${sanitize_link})
# With a shared library (BUILD_SHARED_LIBS) nothing has set an rpath for this link: point the loader there.
if(DEFINED ENV{LD_LIBRARY_PATH} AND NOT "$ENV{LD_LIBRARY_PATH}" STREQUAL "")
  set(ENV{LD_LIBRARY_PATH} "${prefix}/${INSTALL_LIBDIR}:$ENV{LD_LIBRARY_PATH}")
else()
  set(ENV{LD_LIBRARY_PATH} "${prefix}/${INSTALL_LIBDIR}")
endif()
run_step("run consumer (pkg-config)" out COMMAND ${pc_exe})
expect_in("run consumer (pkg-config)" "${out}" "consumer: round trip ok")
message(STATUS "install_consumer: pkg-config consumer passed (${pc_flags_text}):\n${out}")

# pkg_config_consumer(<modules> <source> <exe> <expected output>): builds one program with the flags of
# those .pc files alone and runs it.
function(pkg_config_consumer modules source exe expected)
  run_step("pkg-config --cflags --libs ${modules}" flags_text
    COMMAND ${PKG_CONFIG_EXECUTABLE} --cflags --libs ${modules})
  string(STRIP "${flags_text}" flags_text)
  separate_arguments(flags UNIX_COMMAND "${flags_text}")
  run_step("build ${exe} (pkg-config ${modules})" out
    COMMAND ${CXX_COMPILER} -std=c++20 ${sanitize_compile} ${CONSUMER_SOURCE_DIR}/${source}
            -o ${WORK_DIR}/${exe} ${flags} ${sanitize_link})
  run_step("run ${exe} (pkg-config ${modules})" out COMMAND ${WORK_DIR}/${exe})
  expect_in("run ${exe} (pkg-config ${modules})" "${out}" "${expected}")
endfunction()
pkg_config_consumer("uring-http;uring-resp" parsers.cpp pkgconfig-parsers "consumer: parsers ok")
if(EXPECT_FIBER)
  pkg_config_consumer(uring-fiber fiber_main.cpp pkgconfig-fiber "fiber consumer: ok")
endif()
if(EXPECT_TLS)
  pkg_config_consumer(uring-tls tls_main.cpp pkgconfig-tls "tls consumer: ok")
endif()
message(STATUS "install_consumer: every library's .pc file builds its program")
