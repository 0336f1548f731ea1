# uring_target_options(<target>): warnings and the selected sanitizers, for our own targets only.
function(uring_target_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  if(URING_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${URING_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${URING_SANITIZE})
  endif()
endfunction()
