// The wsp_ggml_cpu_has_* answers of ggml-cpu.h, from the running CPU: cpuid on x86, where an AVX
// or AVX-512 feature also needs the OS to save its registers (XCR0, read by xgetbv); the kernel's
// hwcaps on Linux on ARM and RISC-V. A feature of another architecture is 0. Read once.

#include "ggml-cpu.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#    define WSP_CPU_X86 1
#    include <cpuid.h>
#endif
#if defined(__linux__) && (defined(__aarch64__) || defined(__riscv))
#    define WSP_CPU_HWCAP 1
#    include <sys/auxv.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#    include <sys/prctl.h>
#endif

namespace {

struct Features {
    // x86
    bool sse3 = false, ssse3 = false, avx = false, avx_vnni = false, avx2 = false, bmi2 = false;
    bool f16c = false, fma = false, avx512 = false, avx512_vbmi = false, avx512_vnni = false;
    bool avx512_bf16 = false, amx_int8 = false;
    // ARM
    bool neon = false, arm_fma = false, fp16_va = false, dotprod = false, matmul_int8 = false;
    bool sve = false, sme = false;
    int  sve_cnt = 0;
    // RISC-V
    bool riscv_v = false;
};

#if defined(WSP_CPU_X86)
struct CpuidRegs {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf) {
    CpuidRegs r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
}

bool bit(uint32_t v, int b) {
    return (v >> b) & 1u;
}

// XCR0: the register state the OS saves on a context switch (0 where xgetbv is not enabled)
uint64_t xcr0(bool osxsave) {
    if (!osxsave) {
        return 0;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t) hi << 32) | lo;
}

void detect_x86(Features & f) {
    const uint32_t max_leaf = cpuid(0, 0).eax;
    if (max_leaf < 1) {
        return;
    }
    const CpuidRegs l1 = cpuid(1, 0);
    const uint64_t  x  = xcr0(bit(l1.ecx, 27));
    // XMM and YMM state (bits 1, 2); opmask, upper ZMM0-15 and ZMM16-31 (bits 5, 6, 7); AMX tile
    // configuration and data (bits 17, 18)
    const bool os_avx    = (x & 0x6) == 0x6;
    const bool os_avx512 = os_avx && (x & 0xe0) == 0xe0;
    const bool os_amx    = (x & 0x60000) == 0x60000;

    f.sse3  = bit(l1.ecx, 0);
    f.ssse3 = bit(l1.ecx, 9);
    f.avx   = bit(l1.ecx, 28) && os_avx;
    f.fma   = bit(l1.ecx, 12) && os_avx;
    f.f16c  = bit(l1.ecx, 29) && os_avx;
    if (max_leaf < 7) {
        return;
    }
    const CpuidRegs l7   = cpuid(7, 0);
    const CpuidRegs l7s1 = l7.eax >= 1 ? cpuid(7, 1) : CpuidRegs{};
    f.avx2               = bit(l7.ebx, 5) && os_avx;
    f.bmi2               = bit(l7.ebx, 8);
    f.avx512             = bit(l7.ebx, 16) && os_avx512;
    f.avx512_vbmi        = f.avx512 && bit(l7.ecx, 1);
    f.avx512_vnni        = f.avx512 && bit(l7.ecx, 11);
    f.avx512_bf16        = f.avx512 && bit(l7s1.eax, 5);
    f.avx_vnni           = bit(l7s1.eax, 4) && os_avx;
    f.amx_int8           = bit(l7.edx, 25) && os_amx;
}
#endif

#if defined(WSP_CPU_HWCAP) && defined(__aarch64__)
// the arm64 HWCAP bits of <asm/hwcap.h>, by value so that an older kernel header does not matter
constexpr unsigned long ARM_HWCAP_FP       = 1ul << 0;
constexpr unsigned long ARM_HWCAP_ASIMD    = 1ul << 1;
constexpr unsigned long ARM_HWCAP_ASIMDHP  = 1ul << 10;
constexpr unsigned long ARM_HWCAP_ASIMDDP  = 1ul << 20;
constexpr unsigned long ARM_HWCAP_SVE      = 1ul << 22;
constexpr unsigned long ARM_HWCAP2_I8MM    = 1ul << 13;
constexpr unsigned long ARM_HWCAP2_SME     = 1ul << 23;
constexpr int           ARM_PR_SVE_GET_VL  = 51;
constexpr int           ARM_PR_SVE_VL_MASK = 0xffff;

void detect_arm(Features & f) {
    const unsigned long hw  = getauxval(AT_HWCAP);
    const unsigned long hw2 = getauxval(AT_HWCAP2);
    f.neon                  = (hw & ARM_HWCAP_ASIMD) != 0;
    // AArch64's Advanced SIMD always has fused multiply-add
    f.arm_fma     = f.neon && (hw & ARM_HWCAP_FP) != 0;
    f.fp16_va     = (hw & ARM_HWCAP_ASIMDHP) != 0;
    f.dotprod     = (hw & ARM_HWCAP_ASIMDDP) != 0;
    f.matmul_int8 = (hw2 & ARM_HWCAP2_I8MM) != 0;
    f.sve         = (hw & ARM_HWCAP_SVE) != 0;
    f.sme         = (hw2 & ARM_HWCAP2_SME) != 0;
    if (f.sve) {
        const int vl = prctl(ARM_PR_SVE_GET_VL);
        f.sve_cnt    = vl > 0 ? (vl & ARM_PR_SVE_VL_MASK) : 0;
    }
}
#elif defined(__aarch64__) || defined(__arm__)
// no hwcaps to read (not Linux): what the compiler was told the target has
void detect_arm(Features & f) {
#    if defined(__ARM_NEON)
    f.neon        = true;
#    endif
#    if defined(__ARM_FEATURE_FMA)
    f.arm_fma     = true;
#    endif
#    if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
    f.fp16_va     = true;
#    endif
#    if defined(__ARM_FEATURE_DOTPROD)
    f.dotprod     = true;
#    endif
#    if defined(__ARM_FEATURE_MATMUL_INT8)
    f.matmul_int8 = true;
#    endif
}
#endif

#if defined(WSP_CPU_HWCAP) && defined(__riscv)
void detect_riscv(Features & f) {
    // single-letter extensions are bits of AT_HWCAP, 'V' the vector extension
    f.riscv_v = (getauxval(AT_HWCAP) & (1ul << ('V' - 'A'))) != 0;
}
#endif

Features detect() {
    Features f;
#if defined(WSP_CPU_X86)
    detect_x86(f);
#elif defined(__aarch64__) || defined(__arm__)
    detect_arm(f);
#elif defined(WSP_CPU_HWCAP) && defined(__riscv)
    detect_riscv(f);
#endif
    return f;
}

const Features & features() {
    static const Features f = detect();
    return f;
}

} // namespace

extern "C" {

int wsp_ggml_cpu_has_sse3(void) {
    return features().sse3;
}

int wsp_ggml_cpu_has_ssse3(void) {
    return features().ssse3;
}

int wsp_ggml_cpu_has_avx(void) {
    return features().avx;
}

int wsp_ggml_cpu_has_avx_vnni(void) {
    return features().avx_vnni;
}

int wsp_ggml_cpu_has_avx2(void) {
    return features().avx2;
}

int wsp_ggml_cpu_has_bmi2(void) {
    return features().bmi2;
}

int wsp_ggml_cpu_has_f16c(void) {
    return features().f16c;
}

int wsp_ggml_cpu_has_fma(void) {
    return features().fma;
}

int wsp_ggml_cpu_has_avx512(void) {
    return features().avx512;
}

int wsp_ggml_cpu_has_avx512_vbmi(void) {
    return features().avx512_vbmi;
}

int wsp_ggml_cpu_has_avx512_vnni(void) {
    return features().avx512_vnni;
}

int wsp_ggml_cpu_has_avx512_bf16(void) {
    return features().avx512_bf16;
}

int wsp_ggml_cpu_has_amx_int8(void) {
    return features().amx_int8;
}

int wsp_ggml_cpu_has_neon(void) {
    return features().neon;
}

int wsp_ggml_cpu_has_arm_fma(void) {
    return features().arm_fma;
}

int wsp_ggml_cpu_has_fp16_va(void) {
    return features().fp16_va;
}

int wsp_ggml_cpu_has_dotprod(void) {
    return features().dotprod;
}

int wsp_ggml_cpu_has_matmul_int8(void) {
    return features().matmul_int8;
}

int wsp_ggml_cpu_has_sve(void) {
    return features().sve;
}

int wsp_ggml_cpu_get_sve_cnt(void) {
    return features().sve_cnt;
}

int wsp_ggml_cpu_has_sme(void) {
    return features().sme;
}

int wsp_ggml_cpu_has_riscv_v(void) {
    return features().riscv_v;
}

// POWER, s390x and WebAssembly: this library is not built for them, and where it is, the compiler's
// target is what the code can use
int wsp_ggml_cpu_has_vsx(void) {
#if defined(__POWER9_VECTOR__)
    return 1;
#else
    return 0;
#endif
}

int wsp_ggml_cpu_has_vxe(void) {
#if defined(__VXE__) || defined(__VXE2__)
    return 1;
#else
    return 0;
#endif
}

int wsp_ggml_cpu_has_nnpa(void) {
#if defined(__NNPA__)
    return 1;
#else
    return 0;
#endif
}

int wsp_ggml_cpu_has_wasm_simd(void) {
#if defined(__wasm_simd128__)
    return 1;
#else
    return 0;
#endif
}

int wsp_ggml_cpu_has_llamafile(void) {
    return 0;
}

int wsp_ggml_cpu_has_blas(void) {
    return 0;
}

} // extern "C"
