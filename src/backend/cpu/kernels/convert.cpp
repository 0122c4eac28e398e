// f32 <-> bf16 / fp16 conversions at this level's width; the scalar half_scalar.h functions do
// the tails (and everything the level has no instruction for), with the same rounding.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/half_scalar.h"
#include "backend/cpu/kernels/level.h"

namespace seqtrain::ST_ISA_NS {
namespace {

// bf16 works on the bit patterns. The plain and AVX-512 levels write it on 16-lane GCC vector
// types (AVX-512's vpmovzxwd / vpmovdw; SSE2's unpacks); AVX2 has its own 8-lane intrinsics,
// since a 16-lane type would be split in two and its narrowing done lane by lane.
constexpr int64_t kBfLanes = 16;
using vu = uint32_t __attribute__((vector_size(kBfLanes * 4)));
using vh = uint16_t __attribute__((vector_size(kBfLanes * 2)));

}  // namespace

void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && !defined(__AVX512F__)
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(wide, 16));
  }
#endif
  for (; i + kBfLanes <= n; i += kBfLanes) {
    vh h;
    std::memcpy(&h, src + i, sizeof h);
    const vu u = __builtin_convertvector(h, vu) << 16;
    std::memcpy(dst + i, &u, sizeof u);
  }
  for (; i < n; ++i) dst[i] = half_scalar::from_bf16(src[i]);
}

void f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512BF16__)
  // vcvtneps2bf16 rounds to nearest even, like the scalar tail.
  // The tail goes through the same instruction (masked), so that every element converts alike
  // (it reads f32 subnormals as zero, unlike the scalar path).
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, reinterpret_cast<__m256i&>(v));
  }
#elif defined(__AVX2__) && !defined(__AVX512F__)
  // half_scalar::to_bf16 on 8 lanes: round to nearest even on the bits, NaN kept quiet; then
  // the 32-bit lanes packed to 16 (packus works per 128-bit half, hence the permute).
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), _mm256_and_si256(hi, one)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i bits = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
#else
  // half_scalar::to_bf16 on vectors: round to nearest even on the bits, NaN kept quiet.
  for (; i + kBfLanes <= n; i += kBfLanes) {
    vu u;
    std::memcpy(&u, src + i, sizeof u);
    const vu rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const vu nan = (u & 0x7fffffffu) > 0x7f800000u;  // all ones where NaN
    const vu bits = (nan & ((u >> 16) | 0x40u)) | (~nan & rounded);
    const vh h = __builtin_convertvector(bits, vh);
    std::memcpy(dst + i, &h, sizeof h);
  }
#endif
  for (; i < n; ++i) dst[i] = half_scalar::to_bf16(src[i]);
}

void f32_to_fp16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  // vcvtps2ph with round-to-nearest-even, like the scalar tail (F16C on both levels). The
  // zero-masked AVX-512 form: GCC 12 warns that the unmasked one reads an uninitialized register.
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) dst[i] = half_scalar::to_fp16(src[i]);
}

void fp16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = half_scalar::from_fp16(src[i]);
}

void f32_to_half(HalfType t, const float* src, uint16_t* dst, int64_t n) {
  if (t == HalfType::fp16) f32_to_fp16(src, dst, n);
  else f32_to_bf16(src, dst, n);
}

void half_to_f32(HalfType t, const uint16_t* src, float* dst, int64_t n) {
  if (t == HalfType::fp16) fp16_to_f32(src, dst, n);
  else bf16_to_f32(src, dst, n);
}

}  // namespace seqtrain::ST_ISA_NS
