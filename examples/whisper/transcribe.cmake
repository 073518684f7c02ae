# whisper_transcribe (transcribe.cpp): the batch transcriber, on whisper.cpp unchanged; needs CLI11
# (Debian: libcli11-dev, which ships a CMake config). Skipped with a message when CLI11 is missing.
find_package(CLI11 CONFIG)
if (CLI11_FOUND)
    add_executable(whisper_transcribe "${CMAKE_CURRENT_LIST_DIR}/transcribe.cpp" "${CMAKE_CURRENT_LIST_DIR}/outputs.cpp"
                                      "${CMAKE_CURRENT_LIST_DIR}/wav.cpp")
    target_link_libraries(whisper_transcribe PRIVATE whisper CLI11::CLI11 Threads::Threads)
else()
    message(STATUS "CLI11 not found (apt-get install libcli11-dev): whisper_transcribe is not built")
endif()
