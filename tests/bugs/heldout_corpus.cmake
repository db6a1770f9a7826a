# The plugins of a held-out corpus drawn by a make_corpus.py (heldout2/,
# heldout3/), called from its folder: one per generated W4A8 bug, each entry
# "id=spec" of ARGN (its generated_plugins.cmake), built from
# heldout/gen_plugin.c with its spec; and one per hand-written C bug or correct
# variant of the folder's hand_bugs.tsv (written apart from the generated half;
# without the table there are none), built from its hand_bugs.c with BUG_<id>.
# Each is <build>/plugins/libkr_<corpus>_<id>.so; their targets go into out_var.
function(kr_heldout_corpus_plugins corpus out_var)
  set(plugins)
  foreach(entry ${ARGN})
    string(FIND "${entry}" "=" eq)
    string(SUBSTRING "${entry}" 0 ${eq} id)
    math(EXPR from "${eq} + 1")
    string(SUBSTRING "${entry}" ${from} -1 spec)
    kr_plugin_library(kr_${corpus}_${id} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/heldout/gen_plugin.c)
    target_compile_definitions(kr_${corpus}_${id} PRIVATE "BUG_SPEC=\"${spec}\"" "BUG_NAME=\"${id}\"")
    list(APPEND plugins kr_${corpus}_${id})
  endforeach()
  set(hand_table ${CMAKE_CURRENT_SOURCE_DIR}/hand_bugs.tsv)
  if(EXISTS ${hand_table})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${hand_table})
    # Only each line's first two fields are read: an expect regex may hold an
    # unbalanced '[' that a CMake list of whole lines would glue lines at.
    file(READ ${hand_table} hand_text)
    string(REGEX MATCHALL "\n[^\t\n#]+\tc\t" hand_c_lines "\n${hand_text}")
    foreach(line ${hand_c_lines})
      string(REGEX REPLACE "^\n([^\t]+)\tc\t$" "\\1" bug "${line}")
      if(NOT bug STREQUAL "id" AND NOT TARGET kr_${corpus}_${bug})
        kr_plugin_library(kr_${corpus}_${bug} ${CMAKE_CURRENT_SOURCE_DIR}/hand_bugs.c)
        target_compile_definitions(kr_${corpus}_${bug} PRIVATE BUG_${bug}=1 "BUG_NAME=\"${bug}\"")
        list(APPEND plugins kr_${corpus}_${bug})
      endif()
    endforeach()
  endif()
  set(${out_var} ${plugins} PARENT_SCOPE)
endfunction()
