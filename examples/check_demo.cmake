# SPDX-License-Identifier: MIT
# Checks of kbdemo, run by ctest as
#   cmake -DKBDEMO=<path to kbdemo> -DMODE=<mode> -P check_demo.cmake
# MODE runs:                 the defaults exit 0 and print the total time line.
# MODE deterministic:        three runs each of the defaults and of
#                            --ranks 5 --steps 3 give byte-identical output.
# MODE rejects_bad_options:  bad command lines exit 2 with a message on
#                            stderr and nothing on stdout.
# MODE same_as_c:            KBDEMO (kbdemo_cpp) prints on stdout exactly
#                            what KBDEMO_C (kbdemo) prints, for several
#                            option sets; both exit 0.
cmake_minimum_required(VERSION 3.20)

if(NOT KBDEMO OR NOT MODE)
  message(FATAL_ERROR "usage: cmake -DKBDEMO=<kbdemo> -DMODE=<mode> -P check_demo.cmake")
endif()

# run_demo(<out-var> <rc-var> <err-var> args...)
function(run_demo out_var rc_var err_var)
  execute_process(COMMAND ${KBDEMO} ${ARGN} INPUT_FILE /dev/null
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
endfunction()

set(total_re "total simulated time: [0-9]+\\.[0-9][0-9][0-9] us\n$")

if(MODE STREQUAL "runs")
  run_demo(out rc err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kbdemo exited with '${rc}'\nstderr:\n${err}\nstdout:\n${out}")
  endif()
  if(NOT out MATCHES "${total_re}")
    message(FATAL_ERROR "kbdemo did not end with the total time line:\n${out}")
  endif()
  string(REGEX MATCH "total simulated time: [^\n]*" line "${out}")
  message(STATUS "${line}")

elseif(MODE STREQUAL "deterministic")
  foreach(args IN ITEMS "" "--ranks;5;--steps;3")
    string(REPLACE ";" " " shown "kbdemo ${args}")
    set(first "")
    foreach(i RANGE 1 3)
      run_demo(out rc err ${args})
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${shown} exited with '${rc}' on run ${i}\nstderr:\n${err}")
      endif()
      if(NOT out MATCHES "${total_re}")
        message(FATAL_ERROR "${shown}: no total time line on run ${i}:\n${out}")
      endif()
      if(i EQUAL 1)
        set(first "${out}")
      elseif(NOT out STREQUAL first)
        file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/kbdemo_run1.txt "${first}")
        file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/kbdemo_run${i}.txt "${out}")
        message(FATAL_ERROR "${shown}: run ${i} differs from run 1 "
          "(both saved as kbdemo_run*.txt in ${CMAKE_CURRENT_BINARY_DIR})")
      endif()
    endforeach()
    string(MD5 sum "${first}")
    message(STATUS "${shown}: 3 identical runs (md5 ${sum})")
  endforeach()

elseif(MODE STREQUAL "rejects_bad_options")
  foreach(args IN ITEMS "--ranks;0" "--ranks;abc" "--ranks" "--ranks;-3" "--ranks;9999999999999999999999"
                        "--steps;x" "--steps;-1" "--ranks=" "--bogus" "extra")
    string(REPLACE ";" " " shown "kbdemo ${args}")
    run_demo(out rc err ${args})
    if(NOT rc EQUAL 2)
      message(FATAL_ERROR "${shown}: exit status '${rc}', expected 2\nstderr:\n${err}")
    endif()
    if(err STREQUAL "")
      message(FATAL_ERROR "${shown}: no message on stderr")
    endif()
    if(NOT out STREQUAL "")
      message(FATAL_ERROR "${shown}: unexpected output on stdout:\n${out}")
    endif()
  endforeach()
  run_demo(out rc err --help)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: kbdemo")
    message(FATAL_ERROR "kbdemo --help: exit status '${rc}', stdout:\n${out}")
  endif()

elseif(MODE STREQUAL "same_as_c")
  foreach(args IN ITEMS "" "--ranks;5;--steps;3" "--ranks;1;--steps;0" "--ranks;2" "--seed;7" "--ranks;64;--steps;1")
    string(REPLACE ";" " " shown "${args}")
    run_demo(out rc err ${args})
    execute_process(COMMAND ${KBDEMO_C} ${args} INPUT_FILE /dev/null
      OUTPUT_VARIABLE want ERROR_VARIABLE want_err RESULT_VARIABLE want_rc)
    if(NOT rc EQUAL 0 OR NOT want_rc EQUAL 0)
      message(FATAL_ERROR "'${shown}': exit status '${rc}' (C demo: '${want_rc}')\nstderr:\n${err}${want_err}")
    endif()
    if(NOT out STREQUAL want)
      file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/kbdemo_cpp_out.txt "${out}")
      file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/kbdemo_c_out.txt "${want}")
      message(FATAL_ERROR "'${shown}': the outputs differ (saved as kbdemo_c_out.txt and kbdemo_cpp_out.txt "
        "in ${CMAKE_CURRENT_BINARY_DIR})")
    endif()
    string(MD5 sum "${out}")
    message(STATUS "'${shown}': identical (md5 ${sum})")
  endforeach()

else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
