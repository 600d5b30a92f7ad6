# Included by the root CMakeLists.txt before any component when CRUX_BUILD_FUZZERS=ON: every
# target of this build is compiled with libFuzzer's coverage instrumentation plus ASan and UBSan
# (so coverage inside the loaders and decoders guides the fuzzers), and every UBSan report is
# fatal. Only the fuzz/ executables link libFuzzer itself (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
# Use a separate build directory for this (scripts/fuzz.sh uses build/fuzz).
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "CRUX_BUILD_FUZZERS=ON needs clang (libFuzzer); configure with "
                      "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang, or use "
                      "scripts/fuzz.sh (compiler: ${CMAKE_CXX_COMPILER_ID})")
endif()
set(CRUX_FUZZ_FLAGS
    "-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -gline-tables-only")
# Appended to CMAKE_CXX_FLAGS (not add_compile_options) so that components that look for
# -fsanitize there (client_lib: no Python tests in sanitizer builds) see it.
string(APPEND CMAKE_CXX_FLAGS " ${CRUX_FUZZ_FLAGS}")
string(APPEND CMAKE_C_FLAGS " ${CRUX_FUZZ_FLAGS}")
string(APPEND CMAKE_EXE_LINKER_FLAGS " -fsanitize=address,undefined")
string(APPEND CMAKE_SHARED_LINKER_FLAGS " -fsanitize=address,undefined")
