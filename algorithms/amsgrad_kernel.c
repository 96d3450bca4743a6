/* AMSGrad, the paper variant (algorithms/amsgrad.py), as one loop over memory: compiled by algorithms/native.py
 * with the machine's C compiler and called through ctypes by AMSGrad(impl="native").
 *
 * Per coordinate i, in the eager implementation's order of operations, with a fused multiply-add fma(a, b, c) exactly
 * where torch's vectorized CPU kernels use one (lerp, addcmul) and nowhere else (the build passes
 * -ffp-contract=off), scalars rounded to the vector's dtype as torch rounds a Python float:
 *     m    = fma(1 - beta1, g - m, m)                         torch.lerp, weight < 0.5
 *     v    = fma((1 - beta2) * g, g, v * beta2)               mul_ then addcmul_
 *     vhat = max(vhat, v)                                     NaN-propagating, as torch.maximum
 *     eps = 0: x = fma((-lr) * m, s, x), s = vhat <= floor ? 0 : 1 / sqrt(vhat)     threshold to inf, rsqrt_,
 *                                                                                    addcmul_
 *     eps > 0: x = x + ((-lr) * m) / (vhat <= floor ? inf : sqrt(vhat) + eps)        sqrt_, add_, addcdiv_
 * (a NaN vhat gives a NaN x, as eager). Where torch runs AVX2/AVX-512 kernels, eps = 0 gives eager's bits.
 * n: the vector's length; every pointer is a contiguous CPU buffer of n entries, none aliasing another. */
#include <math.h>
#include <stdint.h>

#define AMSGRAD_PAPER(NAME, T, SQRT, FMA)                                                                              \
  void NAME(T *restrict x, const T *restrict g, T *restrict m, T *restrict v, T *restrict vhat, int64_t n,      \
            double lr_, double one_minus_beta1_, double beta2_, double one_minus_beta2_, double floor_,         \
            double eps_) {                                                                                      \
    const T neg_lr = -(T)lr_, w = (T)one_minus_beta1_, b2 = (T)beta2_, c2 = (T)one_minus_beta2_;                \
    const T vfloor = (T)floor_, eps = (T)eps_;                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                                           \
      const T gi = g[i];                                                                                        \
      const T mi = FMA(w, gi - m[i], m[i]);                                                                      \
      const T vi = FMA(c2 * gi, gi, v[i] * b2);                                                                  \
      const T old = vhat[i];                                                                                    \
      const T hi = (vi != vi || old != old) ? (vi != vi ? vi : old) : (vi > old ? vi : old);                   \
      m[i] = mi;                                                                                                \
      v[i] = vi;                                                                                                \
      vhat[i] = hi;                                                                                             \
      if (eps == (T)0) {                                                                                        \
        const T s = hi <= vfloor ? (T)0 : (T)1 / SQRT(hi);                                                      \
        x[i] = FMA(neg_lr * mi, s, x[i]);                                                                       \
      } else {                                                                                                  \
        x[i] = x[i] + (neg_lr * mi) / (hi <= vfloor ? (T)INFINITY : SQRT(hi) + eps);                                 \
      }                                                                                                         \
    }                                                                                                           \
  }

AMSGRAD_PAPER(amsgrad_paper_f32, float, sqrtf, fmaf)
AMSGRAD_PAPER(amsgrad_paper_f64, double, sqrt, fma)
