# Note [HIP toolchain]: WSP_GGML_HIP=ON compiles src/cuda/**/*.cu as HIP with clang. Included from
# the top-level CMakeLists.txt (a language is enabled there), before enable_language(HIP), this
# file finds what CMake's HIP support needs:
#   - the compiler: ROCm's clang (ROCM_PATH or /opt/rocm), else the clang that hipcc drives (Debian
#     packages HIP 5.2 for clang++-15);
#   - a ROCm root holding lib/cmake/hip-lang: a ROCm install has it; Debian keeps the CMake
#     packages under lib/<multiarch>/cmake, so a root of links to them is made in the build tree;
#   - the device libraries (--hip-device-lib-path where they are not under the root);
#   - the GPU targets: CMAKE_HIP_ARCHITECTURES, by default gfx90a and gfx942 where the compiler
#     knows them, and from them the warp size of the build (Note [HIP warp size] in vendor.cuh).
# hipBLAS (2.x, ROCm 6 and later) and RCCL are used where found (src/hip/backend.cmake).

set(WSP_HIP_ROCM_PATH "")
if (DEFINED ENV{ROCM_PATH})
    set(WSP_HIP_ROCM_PATH "$ENV{ROCM_PATH}")
elseif (EXISTS /opt/rocm)
    set(WSP_HIP_ROCM_PATH /opt/rocm)
endif()

# the compiler
if (NOT CMAKE_HIP_COMPILER AND NOT DEFINED ENV{HIPCXX})
    if (WSP_HIP_ROCM_PATH)
        find_program(WSP_HIP_CLANG clang++ PATHS ${WSP_HIP_ROCM_PATH}/llvm/bin NO_DEFAULT_PATH)
    endif()
    if (NOT WSP_HIP_CLANG)
        find_program(WSP_HIPCC hipcc)
        if (WSP_HIPCC)
            execute_process(COMMAND ${WSP_HIPCC} --version OUTPUT_VARIABLE _hipcc_version ERROR_QUIET)
            if (_hipcc_version MATCHES "clang version ([0-9]+)")
                find_program(WSP_HIP_CLANG clang++-${CMAKE_MATCH_1})
            endif()
        endif()
    endif()
    if (NOT WSP_HIP_CLANG)
        message(FATAL_ERROR "WSP_GGML_HIP: no HIP compiler found (install ROCm, or Debian's hipcc and libamdhip64-dev, "
                            "or set CMAKE_HIP_COMPILER to a clang++ with AMDGPU support)")
    endif()
    set(CMAKE_HIP_COMPILER ${WSP_HIP_CLANG} CACHE FILEPATH "HIP compiler (clang)")
endif()

# the ROCm root and the device libraries
if (NOT CMAKE_HIP_COMPILER_ROCM_ROOT)
    set(_root "${WSP_HIP_ROCM_PATH}")
    if (NOT _root)
        execute_process(COMMAND hipconfig --rocmpath OUTPUT_VARIABLE _root ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    endif()
    if (NOT _root)
        set(_root /usr)
    endif()
    if (NOT EXISTS ${_root}/lib/cmake/hip-lang/hip-lang-config.cmake)
        file(GLOB _hip_lang LIST_DIRECTORIES true ${_root}/lib/*/cmake/hip-lang)
        if (NOT _hip_lang)
            message(FATAL_ERROR "WSP_GGML_HIP: ${_root} holds no hip-lang CMake package "
                                "(Debian: apt-get install libamdhip64-dev)")
        endif()
        # a root of links to the packages' folders, where CMake's HIP support looks for them
        list(GET _hip_lang 0 _hip_lang)
        get_filename_component(_cmake_dir ${_hip_lang} DIRECTORY)
        set(_shim ${CMAKE_BINARY_DIR}/rocm-root)
        file(MAKE_DIRECTORY ${_shim}/lib/cmake)
        file(GLOB _packages LIST_DIRECTORIES true ${_cmake_dir}/*)
        foreach(_package ${_packages})
            get_filename_component(_name ${_package} NAME)
            file(CREATE_LINK ${_package} ${_shim}/lib/cmake/${_name} SYMBOLIC)
        endforeach()
        file(GLOB _bitcode LIST_DIRECTORIES true ${_root}/lib/*/amdgcn/bitcode)
        set(_hip_flags "--rocm-path=${_root}")
        if (_bitcode)
            list(GET _bitcode 0 _bitcode)
            string(APPEND _hip_flags " --hip-device-lib-path=${_bitcode}")
        endif()
        if (NOT DEFINED ENV{HIPFLAGS})
            set(ENV{HIPFLAGS} "${_hip_flags}") # read when the HIP language is enabled, try-compiles included
        endif()
        # hip-lang's own dependencies (amd_comgr, AMDDeviceLibs) are found through the same root
        set(ENV{CMAKE_PREFIX_PATH} "${_shim}:$ENV{CMAKE_PREFIX_PATH}")
        list(APPEND CMAKE_PREFIX_PATH ${_shim})
        set(_root ${_shim})
        message(STATUS "HIP: the CMake packages of ${_cmake_dir} through ${_shim}")
    endif()
    set(CMAKE_HIP_COMPILER_ROCM_ROOT ${_root} CACHE PATH "ROCm root holding lib/cmake/hip-lang")
endif()
list(APPEND CMAKE_PREFIX_PATH ${CMAKE_HIP_COMPILER_ROCM_ROOT}) # hipBLAS and RCCL live there too

# the GPU targets, and the build's warp size
if (NOT DEFINED CMAKE_HIP_ARCHITECTURES)
    set(_known "")
    file(WRITE ${CMAKE_BINARY_DIR}/CMakeFiles/wsp_hip_probe.cpp "")
    foreach(_arch gfx90a gfx942)
        execute_process(COMMAND ${CMAKE_HIP_COMPILER} --target=amdgcn-amd-amdhsa -mcpu=${_arch} -nogpulib -c
                                ${CMAKE_BINARY_DIR}/CMakeFiles/wsp_hip_probe.cpp -o /dev/null
                        RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
        if (_rc EQUAL 0)
            list(APPEND _known ${_arch})
        endif()
    endforeach()
    if (NOT _known)
        message(FATAL_ERROR "WSP_GGML_HIP: ${CMAKE_HIP_COMPILER} knows neither gfx90a nor gfx942; set CMAKE_HIP_ARCHITECTURES")
    endif()
    set(CMAKE_HIP_ARCHITECTURES ${_known} CACHE STRING "AMD GPU targets")
endif()
set(WSP_HIP_WARP_SIZE "")
foreach(_arch ${CMAKE_HIP_ARCHITECTURES})
    if (_arch MATCHES "^gfx9")
        set(_warp 64) # GCN and CDNA
    elseif (_arch MATCHES "^gfx1[0-9]")
        set(_warp 32) # RDNA
    else()
        message(FATAL_ERROR "WSP_GGML_HIP: unknown GPU target ${_arch}")
    endif()
    if (WSP_HIP_WARP_SIZE AND NOT WSP_HIP_WARP_SIZE EQUAL _warp)
        message(FATAL_ERROR "WSP_GGML_HIP: ${CMAKE_HIP_ARCHITECTURES} mixes 64-lane (gfx9) and 32-lane (gfx10+) "
                            "targets; build them separately (Note [HIP warp size])")
    endif()
    set(WSP_HIP_WARP_SIZE ${_warp})
endforeach()

enable_language(HIP)
message(STATUS "HIP backend: ${CMAKE_HIP_COMPILER} (${CMAKE_HIP_COMPILER_VERSION}), targets ${CMAKE_HIP_ARCHITECTURES}, "
               "warp size ${WSP_HIP_WARP_SIZE}")
