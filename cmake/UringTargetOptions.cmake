# uring_target_options(<target>): warnings and the selected sanitizers, for our own targets only.
function(uring_target_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(URING_SANITIZE)
    set(flags -fsanitize=${URING_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    if(URING_SANITIZE MATCHES "undefined")
      # clang 14 cannot emit UBSan's function-type prologue for split coroutine functions
      # ("Cannot represent a difference across sections"); the other UBSan checks stay on.
      list(APPEND flags -fno-sanitize=function)
    endif()
    target_compile_options(${target} PRIVATE ${flags})
    target_link_options(${target} PRIVATE -fsanitize=${URING_SANITIZE})
  endif()
endfunction()
