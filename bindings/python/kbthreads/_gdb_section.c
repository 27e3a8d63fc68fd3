/* SPDX-License-Identifier: MIT */
/*
 * The gdb extension (gdb/kbthreads_gdb.py) in the package's
 * .debug_gdb_scripts section, as the library's own build embeds it
 * (gdb/embed_gdb_script.cmake, which setup.py does not run): gdb runs it
 * when it loads kbthreads._accel, if `set auto-load safe-path` allows. The
 * entry: byte 4 (an inline Python script), the script's name and a
 * newline, its text (assembled from the file with .incbin), a NUL.
 *
 * KB_GDB_SCRIPT: the script's path, a C string (setup.py defines it).
 */
#ifndef KB_GDB_SCRIPT
#error "KB_GDB_SCRIPT (the path of gdb/kbthreads_gdb.py) is not defined"
#endif

#ifdef KB_HAVE_GDB_SECTION
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", @progbits, 1\n"
        ".byte 4\n"
        ".ascii \"kbthreads_gdb.py\\n\"\n"
        ".incbin \"" KB_GDB_SCRIPT "\"\n"
        ".byte 0\n"
        ".popsection\n");
/* src/registry.c refers to it, as to the generated file it stands for. */
const char kb_gdb_script_embedded = 1;
#endif
