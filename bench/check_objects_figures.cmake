# check_objects_figures.cmake: bench_objects reports a figure that fails its own check as none.
# With one tensor view alive, packfn's view takes a block of the span its base tensor's header
# already cut, so no memory is newly in use: the program says so and exits 1, and its reports
# must give packfn's bytes per object as "-" (markdown) and null (JSON), not 0.
#   cmake -DBENCH=<bench_objects> -DOUT=<folder> -P check_objects_figures.cmake
file(MAKE_DIRECTORY "${OUT}")
set(md "${OUT}/objects_figures.md")
set(json "${OUT}/objects_figures.json")
file(REMOVE "${md}" "${json}")
execute_process(
  COMMAND "${BENCH}" --n 1 --rounds 2 --reps 1 --kind tensor_view --md "${md}" --json "${json}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT err MATCHES "tensor_view packfn: no memory in use per object")
  message(FATAL_ERROR "the case did not occur (nothing checked): status ${rc}, stderr:\n${err}")
endif()
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected status 1 for the failed figure, got ${rc}")
endif()
file(READ "${md}" text)
if(NOT text MATCHES "\\| tensor_view \\| [^|\n]*\\| - \\|")
  message(FATAL_ERROR "packfn's bytes per object is not '-' in the markdown:\n${text}")
endif()
file(READ "${json}" text)
if(NOT text MATCHES "\"impl\": \"packfn\", [^}]*\"bytes_per_object\": null")
  message(FATAL_ERROR "packfn's bytes_per_object is not null in the JSON:\n${text}")
endif()
