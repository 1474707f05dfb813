# Included from tests/CMakeLists.txt: every tests/fuzz/fuzz_<name>.c is also built, without
# libFuzzer, into replay_fuzz_<name> (tests/fuzz/replay_main.c), and ctest runs it on the
# committed inputs in tests/fuzz/seeds/fuzz_<name>/: the seeds and every input that once
# found a bug replay in `make test` through the same entry point the fuzzer calls.
file(GLOB EST_FUZZ_REPLAY CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
foreach(src ${EST_FUZZ_REPLAY})
  get_filename_component(name ${src} NAME_WE)
  add_executable(replay_${name} ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c)
  target_include_directories(replay_${name} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  # The define lets fuzz_ckpt.c and fuzz_tfrecord.c name the checksum switch (replay_main.c).
  target_compile_definitions(replay_${name} PRIVATE EST_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data"
                             FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  target_link_libraries(replay_${name} PRIVATE est_lib)
  add_test(NAME replay_${name} COMMAND replay_${name} ${CMAKE_SOURCE_DIR}/tests/fuzz/seeds/${name})
endforeach()
