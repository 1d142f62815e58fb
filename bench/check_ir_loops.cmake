# check_ir_loops.cmake: packfn_bench's reports name the callgrind loops its merged instruction
# counts come from (ir.tsv's iters column), not only the loop of its own run (--iters).
#   cmake -DBENCH=<packfn_bench> -DOUT=<folder> -P check_ir_loops.cmake
file(MAKE_DIRECTORY "${OUT}")
set(ir "${OUT}/ir.tsv")
set(md "${OUT}/ir_loops.md")
set(json "${OUT}/ir_loops.json")
file(WRITE "${ir}" "# impl\top\tir_per_op\titers\tir_total\ndirect\tcall_0\t8.02\t2000\t16040\n")
file(REMOVE "${md}" "${json}")
execute_process(
  COMMAND "${BENCH}" --op call_0 --impl direct --no-time --iters 100 --ir "${ir}" --md "${md}"
          --json "${json}"
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "packfn_bench failed (status ${rc}):\n${err}")
endif()
file(READ "${md}" text)
if(NOT text MATCHES "Ir/op from callgrind \\(loops of 2000 operations\\)")
  message(FATAL_ERROR "the markdown does not name the callgrind loop:\n${text}")
endif()
file(READ "${json}" text)
if(NOT text MATCHES "\"ir_per_op\": 8\\.0200, \"ir_iters\": 2000")
  message(FATAL_ERROR "the JSON does not name the callgrind loop:\n${text}")
endif()
