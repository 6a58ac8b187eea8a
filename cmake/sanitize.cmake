# MMT_SANITIZE: AddressSanitizer and UBSan on every target, and what the tests need to run
# under them (scripts/sanitize.sh configures, builds and runs them).  Included by the root
# CMakeLists.txt before any target; the functions below do nothing without MMT_SANITIZE.
#
#   mmt_sanitize_tests()          at the end of a folder's CMakeLists.txt: its tests stop and
#                                 fail at a UBSan report, with a stack trace
#   mmt_sanitize_host(tests...)   tests whose program is not ours (python3, netlib's BLAS test
#                                 programs) and loads libmmtune.so or libmmtune_blas.so
#   mmt_sanitize_dlopen(tests...) tests in which libmmtune_blas.so dlopens libmmtune.so

# -fsanitize as two flags: a comma would split a generator expression's arguments.  No
# recovery: UBSan ends the program at its first report, so the test fails.
set(MMT_SANITIZE_FLAGS -fsanitize=address -fsanitize=undefined -fno-sanitize-recover=all)

if(MMT_SANITIZE)
  add_compile_options(${MMT_SANITIZE_FLAGS} -fno-omit-frame-pointer)
  add_link_options(${MMT_SANITIZE_FLAGS})
  # The instrumentation misleads GCC's flow-based warnings (GCC's manual advises against
  # sanitizers with -Werror): GCC 12 sees gen_grid_eval read 72 bytes "from a region of size
  # 1" out of a gen_kernel's grid[3].  The unsanitized build keeps the warning.
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-stringop-overread)
  endif()

  # A sanitized library needs the ASan runtime first in the process: a program that is not
  # linked with it (python3, a netlib test program) must preload it.
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    set(asan_name libasan.so)
  else()
    set(asan_name libclang_rt.asan-${CMAKE_SYSTEM_PROCESSOR}.so)
  endif()
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${asan_name}
                  OUTPUT_VARIABLE MMT_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE asan_rc)
  if(NOT asan_rc EQUAL 0 OR NOT IS_ABSOLUTE "${MMT_ASAN_RUNTIME}" OR
     NOT EXISTS "${MMT_ASAN_RUNTIME}")
    message(FATAL_ERROR "MMT_SANITIZE: ${CMAKE_C_COMPILER} -print-file-name=${asan_name} "
                        "found no ASan runtime ('${MMT_ASAN_RUNTIME}')")
  endif()
endif()

function(mmt_sanitize_tests)
  if(NOT MMT_SANITIZE)
    return()
  endif()
  get_directory_property(tests TESTS)
  if(tests)
    set_property(TEST ${tests} APPEND PROPERTY ENVIRONMENT
                 "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
  endif()
endfunction()

# The program loads ASan first through LD_PRELOAD.  verify_asan_link_order=0: a script may put
# its own library before it (blas/conformance.sh preloads the shim ahead of the caller's
# LD_PRELOAD), which ASan tolerates when it is loaded at start.  detect_leaks=0: what python3
# and gfortran's runtime keep until exit is theirs, not ours; our own programs keep the leak
# check.
function(mmt_sanitize_host)
  if(NOT MMT_SANITIZE)
    return()
  endif()
  set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT_MODIFICATION
               "LD_PRELOAD=path_list_prepend:${MMT_ASAN_RUNTIME}"
               "ASAN_OPTIONS=set:detect_leaks=0:verify_asan_link_order=0")
endfunction()

# ASan intercepts dlopen, so glibc sees libasan as the caller and searches its RUNPATH, not
# libmmtune_blas.so's (google/sanitizers#1219): the shim's dlopen of libmmtune.so finds it
# only on LD_LIBRARY_PATH.
function(mmt_sanitize_dlopen)
  if(NOT MMT_SANITIZE)
    return()
  endif()
  set_property(TEST ${ARGN} APPEND PROPERTY ENVIRONMENT_MODIFICATION
               "LD_LIBRARY_PATH=path_list_prepend:$<TARGET_FILE_DIR:mmtune_shared>")
endfunction()
