# whisper_transcribe (transcribe.cpp), the batch transcriber on whisper.cpp unchanged, and
# whisper_audio, which decodes a file as the transcriber hears it. They need CLI11 (Debian:
# libcli11-dev), nlohmann-json (nlohmann-json3-dev: the manifests) and FFmpeg's libraries
# (libavformat-dev libavcodec-dev libswresample-dev, found by pkg-config); without them they are
# skipped with a message.
find_package(CLI11 CONFIG)
find_package(nlohmann_json CONFIG)
find_package(PkgConfig)
if (PkgConfig_FOUND)
    pkg_check_modules(FFMPEG IMPORTED_TARGET libavformat libavcodec libswresample libavutil)
endif()
if (CLI11_FOUND AND nlohmann_json_FOUND AND FFMPEG_FOUND)
    add_library(whisper_audio_input STATIC "${CMAKE_CURRENT_LIST_DIR}/audio.cpp")
    target_link_libraries(whisper_audio_input PUBLIC PkgConfig::FFMPEG)
    add_executable(whisper_transcribe "${CMAKE_CURRENT_LIST_DIR}/transcribe.cpp" "${CMAKE_CURRENT_LIST_DIR}/outputs.cpp"
                                      "${CMAKE_CURRENT_LIST_DIR}/manifest.cpp" "${CMAKE_CURRENT_LIST_DIR}/decoding.cpp"
                                      "${CMAKE_CURRENT_LIST_DIR}/workers.cpp")
    target_link_libraries(whisper_transcribe PRIVATE whisper whisper_audio_input CLI11::CLI11 nlohmann_json::nlohmann_json
                                                     Threads::Threads)
    add_executable(whisper_audio "${CMAKE_CURRENT_LIST_DIR}/whisper_audio.cpp" "${CMAKE_CURRENT_LIST_DIR}/outputs.cpp")
    target_link_libraries(whisper_audio PRIVATE whisper_audio_input)
else()
    message(STATUS "whisper_transcribe is not built: it needs CLI11 (libcli11-dev), nlohmann-json "
                   "(nlohmann-json3-dev) and FFmpeg's libraries (libavformat-dev libavcodec-dev libswresample-dev, pkg-config)")
endif()
# wsp-whisper-server (server.cpp): the OpenAI audio API over the same pieces; also needs
# cpp-httplib (Debian: libcpp-httplib-dev, found by pkg-config)
if (TARGET whisper_audio_input AND PkgConfig_FOUND)
    pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
endif()
if (TARGET whisper_audio_input AND HTTPLIB_FOUND)
    add_executable(wsp-whisper-server "${CMAKE_CURRENT_LIST_DIR}/server.cpp" "${CMAKE_CURRENT_LIST_DIR}/outputs.cpp"
                                      "${CMAKE_CURRENT_LIST_DIR}/decoding.cpp" "${CMAKE_CURRENT_LIST_DIR}/workers.cpp")
    target_link_libraries(wsp-whisper-server PRIVATE whisper whisper_audio_input PkgConfig::HTTPLIB CLI11::CLI11
                                                     nlohmann_json::nlohmann_json Threads::Threads)
else()
    message(STATUS "wsp-whisper-server is not built: it needs what whisper_transcribe needs and cpp-httplib "
                   "(libcpp-httplib-dev)")
endif()
