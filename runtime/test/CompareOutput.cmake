# cmake -DCOMMAND=<exe> -DINPUT=<file> -DEXPECTED=<file> -P CompareOutput.cmake
# Runs COMMAND INPUT and fails unless it exits 0 with stdout equal to EXPECTED.
execute_process(COMMAND ${COMMAND} ${INPUT}
  OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${COMMAND} ${INPUT} exited with ${status}: ${errors}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "output differs from ${EXPECTED}:\n${actual}")
endif()
