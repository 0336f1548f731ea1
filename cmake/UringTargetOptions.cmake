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
