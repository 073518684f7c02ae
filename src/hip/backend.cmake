# Note [HIP toolchain]: the CUDA backend's target (src/CMakeLists.txt) compiled as HIP. Included
# from src/CMakeLists.txt, where the target is made: source properties hold per directory.

set_source_files_properties(${WSP_CUDA_SOURCES} PROPERTIES LANGUAGE HIP)
# the library says which vendor it is for; its CMake target keeps the backend's one name
set_target_properties(wsp-ggml-cuda PROPERTIES OUTPUT_NAME wsp-ggml-hip HIP_VISIBILITY_PRESET hidden)

string(REPLACE ";" "," WSP_HIP_ARCHS_STR "${CMAKE_HIP_ARCHITECTURES}")
# WSP_GGML_USE_HIP is public: ggml-cuda.h then names the backend "ROCm" for every client
target_compile_definitions(wsp-ggml-cuda
    PUBLIC  WSP_GGML_USE_HIP
    PRIVATE WSP_HIP_WARP_SIZE=${WSP_HIP_WARP_SIZE} WSP_GGML_CUDA_ARCHS="${WSP_HIP_ARCHS_STR}")
target_compile_options(wsp-ggml-cuda PRIVATE
    $<$<COMPILE_LANGUAGE:HIP>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)

if (hipblas_FOUND)
    target_compile_definitions(wsp-ggml-cuda PRIVATE WSP_GGML_USE_HIPBLAS)
    target_link_libraries(wsp-ggml-cuda PRIVATE roc::hipblas)
endif()
if (WSP_GGML_NCCL)
    target_link_libraries(wsp-ggml-cuda PRIVATE rccl::rccl)
endif()
