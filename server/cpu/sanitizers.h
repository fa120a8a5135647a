// Whether this build runs under a sanitizer (ASan, TSan, MSan, or clang's
// UBSan): the CPU loops then take no ifunc-chosen clones (their resolvers run
// before the sanitizer runtime is set up, and crash every binary at load),
// and the tests cut their largest cases (instrumented, they ran past their
// timeouts) to sizes that still cross the thresholds where the threaded and
// radix code starts.
#ifndef PRIMSERVE_SERVER_CPU_SANITIZERS_H_
#define PRIMSERVE_SERVER_CPU_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRIMSERVE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define PRIMSERVE_SANITIZED 1
#endif
#endif

// Function multiversioning: an AVX2 clone chosen at load by an ifunc
// resolver where the machine has AVX2, except under the sanitizers, whose
// builds take the default clone's code.
#if defined(PRIMSERVE_SANITIZED)
#define PRIMSERVE_AVX2_CLONES
#else
#define PRIMSERVE_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif

namespace primserve::cpu {
#if defined(PRIMSERVE_SANITIZED)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace primserve::cpu

#endif  // PRIMSERVE_SERVER_CPU_SANITIZERS_H_
