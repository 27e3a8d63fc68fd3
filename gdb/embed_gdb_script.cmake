# SPDX-License-Identifier: MIT
# Turn gdb/kbthreads_gdb.py into a C file that puts the script in the
# library's .debug_gdb_scripts section, so gdb runs it when it loads the
# library (if `set auto-load safe-path` allows; see docs/debugging.md).
#
#   cmake -DIN=gdb/kbthreads_gdb.py -DOUT=<build>/kb_gdb_script.c -P gdb/embed_gdb_script.cmake
#
# The section holds one entry: byte 4 (gdb's SECTION_SCRIPT_ID_PYTHON_TEXT:
# an inline Python script), the script's name and a newline, the script's
# text, and a NUL. "MS" (mergeable strings, entry size 1) lets the linker
# keep a single copy when several objects carry the same entry. The bytes
# are emitted as .byte lists, so the script needs no escaping; it must not
# contain a NUL byte.
if(NOT DEFINED IN OR NOT DEFINED OUT)
  message(FATAL_ERROR "usage: cmake -DIN=<script.py> -DOUT=<file.c> -P embed_gdb_script.cmake")
endif()
get_filename_component(_name ${IN} NAME)
file(READ ${IN} _hex HEX)
if(_hex MATCHES "^(..)*00")
  message(FATAL_ERROR "${IN} contains a NUL byte; it cannot be embedded")
endif()
# 24 bytes (48 hex digits) per .byte line
string(REGEX REPLACE "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])"
       "\\1\n" _lines "${_hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _lines "${_lines}")
string(REGEX REPLACE ",\n" "\\\\n\"\n        \".byte " _lines "${_lines}")
string(REGEX REPLACE ",$" "" _lines "${_lines}")
string(REGEX REPLACE "\n        \"\\.byte $" "" _lines "${_lines}")
set(_c "/* Generated from ${_name} by gdb/embed_gdb_script.cmake: do not edit. */
__asm__(\".pushsection \\\".debug_gdb_scripts\\\", \\\"MS\\\", @progbits, 1\\n\"
        \".byte 4\\n\"
        \".ascii \\\"${_name}\\\\n\\\"\\n\"
        \".byte ${_lines}\\n\"
        \".byte 0\\n\"
        \".popsection\\n\");
/* Referred to by src/registry.c, so a program linked with the static
 * library gets this object, and the section, too. */
const char kb_gdb_script_embedded = 1;
")
# Rewrite only when the text changed (no needless relinks).
if(EXISTS ${OUT})
  file(READ ${OUT} _old)
  if(_old STREQUAL _c)
    return()
  endif()
endif()
file(WRITE ${OUT} "${_c}")
