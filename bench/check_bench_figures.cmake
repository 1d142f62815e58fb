# check_bench_figures.cmake: packfn_bench reports no figure of an operation whose
# implementations return different checksums. The shim (check_disagree_shim.c, LD_PRELOAD)
# makes TVM-FFI's string_5 strings one byte short; the program must say so, exit 1, and give
# string_5's times and ratio as "-" (markdown) and null (JSON).
#   cmake -DBENCH=<packfn_bench> -DSHIM=<shim library> -DOUT=<folder> -P check_bench_figures.cmake
file(MAKE_DIRECTORY "${OUT}")
set(md "${OUT}/bench_figures.md")
set(json "${OUT}/bench_figures.json")
file(REMOVE "${md}" "${json}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "LD_PRELOAD=${SHIM}" PACKFN_NO_TVM_FFI=1 "${BENCH}" --op
          string_5 --impl packfn,tvmffi --iters 1000 --reps 1 --md "${md}" --json "${json}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT err MATCHES "string_5: checksum [0-9]+ \\(packfn\\) differs")
  message(FATAL_ERROR "the disagreement did not occur (nothing checked): status ${rc}:\n${err}")
endif()
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected status 1 for the disagreement, got ${rc}")
endif()
file(READ "${md}" text)
if(NOT text MATCHES "\n\\| string_5 \\| - \\| - \\| - \\|\n")
  message(FATAL_ERROR "string_5's row has figures in the markdown:\n${text}")
endif()
file(READ "${json}" text)
if(text MATCHES "\"ns_median\": [0-9]" OR text MATCHES "\"time\": [0-9]")
  message(FATAL_ERROR "string_5 has figures in the JSON:\n${text}")
endif()
