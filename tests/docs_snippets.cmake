# tests/docs_snippets.cmake — every C++ block of README.md and docs/**/*.md as a translation unit of its own,
# so that a snippet the library no longer accepts breaks the build (and the docs_snippets_compile test).
#
# uring_docs_snippets(<out-var>) writes one .cpp per block under docs_snippets/ in the current binary dir and
# sets <out-var> to their paths. The blocks, by their opening fence (docs/README.md describes them for
# writers):
#   ```cpp            a whole file: compiled as it stands
#   ```cpp fragment   the body of a coroutine returning uring::task<void>, after #include <uring/uring.hpp>
#                     and `using namespace std::chrono_literals;`; it declares whatever it uses
# Any other word after ```cpp is an error, so a typo cannot hide a block from the check. A block that
# includes uring/fiber.hpp or a uring/tls/ header is left out when that library is not built. Each unit
# starts with a #line directive: a compiler error names the page and the line of the block.
# The pages are configure dependencies (a new page too, by the glob), so an edited page is extracted
# again by the next build.

function(uring_docs_snippets out_var)
  file(GLOB_RECURSE pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
  list(SORT pages)
  list(PREPEND pages ${PROJECT_SOURCE_DIR}/README.md)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${pages})
  set(units)
  set(skipped 0)
  foreach(page IN LISTS pages)
    file(READ ${page} text)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${page})
    string(MAKE_C_IDENTIFIER ${rel} page_id)
    # The text is walked by offsets, never split into a list: C++ is full of ';' and '[', which lists mangle.
    set(offset 0)
    while(TRUE)
      string(SUBSTRING "${text}" ${offset} -1 rest)
      string(FIND "${rest}" "\n```c" at)
      if(at EQUAL -1)
        break()
      endif()
      math(EXPR fence_start "${offset} + ${at} + 1")
      string(SUBSTRING "${text}" ${fence_start} -1 from_fence)
      string(FIND "${from_fence}" "\n" fence_len)
      string(SUBSTRING "${from_fence}" 0 ${fence_len} fence)
      math(EXPR body_start "${fence_start} + ${fence_len} + 1")
      if(NOT fence MATCHES "^```(cpp|c\\+\\+|cxx|c)( .*)?$")
        # ```cmake, ```console, ...: not C++.
        set(offset ${body_start})
        continue()
      endif()
      set(language "${CMAKE_MATCH_1}")
      string(STRIP "${CMAKE_MATCH_2}" kind)
      string(SUBSTRING "${text}" 0 ${body_start} before)
      string(REGEX MATCHALL "\n" newlines "${before}")
      list(LENGTH newlines lines_before)
      math(EXPR line "${lines_before} + 1")
      if(NOT language STREQUAL "cpp" OR NOT kind MATCHES "^(|fragment)$")
        message(FATAL_ERROR "${rel}:${lines_before}: a code block opens with '${fence}'; C++ blocks are "
                            "```cpp (a whole file) or ```cpp fragment (see docs/README.md)")
      endif()
      string(SUBSTRING "${text}" ${body_start} -1 from_body)
      string(FIND "${from_body}" "\n```" body_len)
      if(body_len EQUAL -1)
        message(FATAL_ERROR "${rel}:${lines_before}: a ```cpp block is never closed")
      endif()
      math(EXPR body_len "${body_len} + 1")
      string(SUBSTRING "${from_body}" 0 ${body_len} body)
      math(EXPR offset "${body_start} + ${body_len}")

      if((body MATCHES "uring/fiber\\.hpp" AND NOT TARGET uring::fiber)
         OR (body MATCHES "uring/tls/" AND NOT TARGET uring::tls))
        math(EXPR skipped "${skipped} + 1")
        continue()
      endif()
      if(kind STREQUAL "fragment")
        string(CONCAT unit_text "#include <uring/uring.hpp>\nusing namespace std::chrono_literals;\n"
                      "namespace docs_snippet {\n[[maybe_unused]] uring::task<void> fragment() {\n"
                      "#line ${line} \"${page}\"\n" "${body}" "co_return;\n}\n}  // namespace docs_snippet\n")
      else()
        set(unit_text "#line ${line} \"${page}\"\n${body}")
      endif()
      set(unit_file ${CMAKE_CURRENT_BINARY_DIR}/docs_snippets/${page_id}_${line}.cpp)
      file(GENERATE OUTPUT ${unit_file} CONTENT "${unit_text}")
      list(APPEND units ${unit_file})
    endwhile()
  endforeach()
  # Units of blocks that moved or went: removed, so the directory holds only what is compiled.
  file(GLOB old_units ${CMAKE_CURRENT_BINARY_DIR}/docs_snippets/*.cpp)
  foreach(old IN LISTS old_units)
    if(NOT old IN_LIST units)
      file(REMOVE ${old})
    endif()
  endforeach()
  list(LENGTH units count)
  if(count EQUAL 0)
    message(FATAL_ERROR "tests: no ```cpp block found in README.md or docs/")
  endif()
  message(STATUS "tests: ${count} C++ blocks of the docs compiled by docs_snippets_check (${skipped} left out: "
                 "their library is not built)")
  set(${out_var} ${units} PARENT_SCOPE)
endfunction()
