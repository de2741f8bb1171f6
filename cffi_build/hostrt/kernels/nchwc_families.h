/* Includes the template header NC_TMPL (a string) once per NCHWc8 kernel family (nchwc.h): with
 * NCF(name) naming the family's copy (name_avx512 / name_avx2 / name_generic), NC_TARGET its target
 * attribute (generic: none, the build's own flags) and NC_PIN(v) keeping a vector in a register
 * (the constraint its registers need: "v" reaches AVX-512's 32).  No include guard: each kernel
 * file includes it once, for its own template. */
#if defined(NC_HAVE_X86)
#define NCF(x) NC_CAT(x, avx512)
#define NC_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma")))
#define NC_PIN(v) __asm__("" : "+v"(v))
#include NC_TMPL
#undef NCF
#undef NC_TARGET
#undef NC_PIN
#define NCF(x) NC_CAT(x, avx2)
#define NC_TARGET __attribute__((target("avx2,fma")))
#define NC_PIN(v) __asm__("" : "+x"(v))
#include NC_TMPL
#undef NCF
#undef NC_TARGET
#undef NC_PIN
#endif
#define NCF(x) NC_CAT(x, generic)
#define NC_TARGET
#ifdef __AVX__
#define NC_PIN(v) __asm__("" : "+x"(v))
#else
#define NC_PIN(v) ((void)0)
#endif
#include NC_TMPL
#undef NCF
#undef NC_TARGET
#undef NC_PIN
