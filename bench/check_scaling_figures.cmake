# check_scaling_figures.cmake: bench_scaling reports no figure of a point whose implementations
# return different checksums. The shim (check_disagree_shim.c, LD_PRELOAD) makes TVM-FFI's
# lookup miss "bench.scale.5", the hot name of the 10-name table: the program must say so,
# exit 1, and leave the hot lookup at 10 names out of the CSV and the JSON on both sides, while
# the points that agree (the argument series) stay.
#   cmake -DBENCH=<bench_scaling> -DSHIM=<shim library> -DOUT=<folder> -P check_scaling_figures.cmake
file(MAKE_DIRECTORY "${OUT}")
set(csv "${OUT}/scaling_figures.csv")
set(json "${OUT}/scaling_figures.json")
file(REMOVE "${csv}" "${json}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "LD_PRELOAD=${SHIM}" PACKFN_NO_TVM_FFI=1 "${BENCH}" --quick
          --iters 1000 --reps 1 --csv "${csv}" --json "${json}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT err MATCHES "bench_scaling: lookup 10: checksum [0-9]+ \\([a-z]+\\) != [0-9]+ \\([a-z]+\\)")
  message(FATAL_ERROR "the disagreement did not occur (nothing checked): status ${rc}:\n${err}")
endif()
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected status 1 for the disagreement, got ${rc}")
endif()
if(NOT err MATCHES "left out of the ratios, the CSV and the JSON")
  message(FATAL_ERROR "the program did not say what it left out:\n${err}")
endif()
if(err MATCHES "ratios +10 names: hot packfn/tvmffi")
  message(FATAL_ERROR "a ratio of the disagreeing point was printed:\n${err}")
endif()
file(READ "${csv}" text)
if(text MATCHES "\nlookup,(packfn|tvmffi),10,")
  message(FATAL_ERROR "the disagreeing point has figures in the CSV:\n${text}")
endif()
if(NOT text MATCHES "\nargs,packfn,1," OR NOT text MATCHES "\nargs,tvmffi,1,")
  message(FATAL_ERROR "the points that agree are missing from the CSV:\n${text}")
endif()
file(READ "${json}" text)
if(text MATCHES "\"series\": \"lookup\", \"impl\": \"[a-z]+\", \"x\": 10,")
  message(FATAL_ERROR "the disagreeing point has figures in the JSON:\n${text}")
endif()
if(NOT text MATCHES "\"series\": \"args\"")
  message(FATAL_ERROR "the points that agree are missing from the JSON:\n${text}")
endif()
