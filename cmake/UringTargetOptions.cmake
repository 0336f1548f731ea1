# uring_sanitizer_flags(<compile_var> <link_var>): the compiler and linker flags URING_SANITIZE asks for
# (both empty without sanitizers). Also what a program linking the sanitized library must use
# (tests/install passes them to its consumer build).
function(uring_sanitizer_flags compile_var link_var)
  set(compile_flags)
  set(link_flags)
  if(URING_SANITIZE)
    set(compile_flags -fsanitize=${URING_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    if(URING_SANITIZE MATCHES "undefined")
      # clang 14 cannot emit UBSan's function-type prologue for split coroutine functions
      # ("Cannot represent a difference across sections"); the other UBSan checks stay on.
      list(APPEND compile_flags -fno-sanitize=function)
    endif()
    set(link_flags -fsanitize=${URING_SANITIZE})
  endif()
  set(${compile_var} ${compile_flags} PARENT_SCOPE)
  set(${link_var} ${link_flags} PARENT_SCOPE)
endfunction()

# uring_target_options(<target>): warnings and the selected sanitizers, for our own targets only.
function(uring_target_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  uring_sanitizer_flags(compile_flags link_flags)
  if(compile_flags)
    target_compile_options(${target} PRIVATE ${compile_flags})
    target_link_options(${target} PRIVATE ${link_flags})
  endif()
endfunction()

# uring_library_names(<target> <export_name> <file_suffix>): what a library of ours is called outside the
# build — uring::<export_name> in the CMake package, liburingcxx<file_suffix>.{a,so} on disk — and, when
# shared, its version: the soname carries major.minor while the major version is 0 (each minor release
# may change the ABI), the major alone after that.
function(uring_library_names target export_name file_suffix)
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(soversion ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  else()
    set(soversion ${PROJECT_VERSION_MAJOR})
  endif()
  # INSTALL_RPATH: an installed shared library finds its siblings (liburingcxx_tls.so needs liburingcxx.so)
  # wherever the prefix is; a program's RUNPATH does not reach its libraries' own dependencies.
  set_target_properties(${target} PROPERTIES OUTPUT_NAME uringcxx${file_suffix} EXPORT_NAME ${export_name}
    VERSION ${PROJECT_VERSION} SOVERSION ${soversion} INSTALL_RPATH "$ORIGIN")
endfunction()
