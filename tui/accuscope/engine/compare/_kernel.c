/* The per-chunk loops of engine/metrics.py, fused: one read of each element feeds every sum.
 *
 * numpy needs about forty passes per element for the ten metrics (one per operation); here each
 * element is loaded once, widened to double, and updates all the sums in registers. The loops are
 * written for the compiler's vectorizer (`omp simd` reductions: only the order of additions
 * changes, never a result's precision, all sums stay in double). The GIL is released while they
 * run. metrics.py holds the numpy version of the same arithmetic, used when this module is absent;
 * the tests hold the two to the same numbers.
 *
 * moments(x, y) -> (sxy, sxx, syy, sx, sy, sdd, sad, mad, srel, mrel, over1, over5,
 *                   xmin, xmax, ymin, ymax)
 * kl(x, y, xlo, xfloor, ylo, yfloor, c, bound) -> (sum ax, sum ay, sum q ln(q/ay) - q + ay)
 *     with ax = max(x - xlo, xfloor), ay likewise, q = c*ax: see metrics._kl for the algebra.
 * x and y: C-contiguous buffers of equal length, both float32 or both float64.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

/* On x86-64 with GCC and glibc, each loop is also built for AVX2 and the CPU picks at load time
 * (12-15% faster on a Zen 1 core that splits 256-bit operations; more on newer ones). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

typedef struct {
    double sxy, sxx, syy, sx, sy, sdd, sad, mad, srel, mrel, xmin, xmax, ymin, ymax;
    double over1, over5;  /* counts, kept in double so that the loop vectorizes */
} Moments;

/* One definition per element type; the body is the same arithmetic for float and double.
 * Two loops per block of BLOCK elements (the second reads them from L1): one loop holding all
 * sixteen running values needs more registers than there are, and spilling made it twice as slow. */
#define BLOCK 2048
#define DEFINE_MOMENTS(NAME, T)                                                                   \
CLONES static void NAME(const T *restrict x, const T *restrict y, Py_ssize_t n, Moments *m)              \
{                                                                                                 \
    double sxy = 0, sxx = 0, syy = 0, sx = 0, sy = 0, sdd = 0, sad = 0, srel = 0;                \
    double mad = 0, mrel = 0, xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY; \
    double over1 = 0, over5 = 0;                                                                  \
    for (Py_ssize_t lo = 0; lo < n; lo += BLOCK) {                                                \
        Py_ssize_t hi = n - lo > BLOCK ? lo + BLOCK : n;                                          \
        _Pragma("omp simd reduction(+:sxy,sxx,syy,sx,sy) reduction(max:xmax,ymax) reduction(min:xmin,ymin)") \
        for (Py_ssize_t i = lo; i < hi; i++) {                                                    \
            double a = x[i], b = y[i];                                                            \
            sxy += a * b; sxx += a * a; syy += b * b; sx += a; sy += b;                           \
            xmin = a < xmin ? a : xmin; xmax = a > xmax ? a : xmax;                               \
            ymin = b < ymin ? b : ymin; ymax = b > ymax ? b : ymax;                               \
        }                                                                                         \
        _Pragma("omp simd reduction(+:sdd,sad,srel,over1,over5) reduction(max:mad,mrel)")         \
        for (Py_ssize_t i = lo; i < hi; i++) {                                                    \
            double a = x[i], b = y[i], d = a - b, ad = fabs(d);                                   \
            /* r = |x/y - 1| where |y| > eps64, else 0 (metrics.md section 1), literally: the    \
               equal |x-y|/|y| rounds differently and moves elements across the 0.1% line */     \
            double r = fabs(b) > DBL_EPSILON ? fabs(a / b - 1.0) : 0.0;                           \
            sdd += d * d; sad += ad; mad = ad > mad ? ad : mad;                                   \
            srel += r; mrel = r > mrel ? r : mrel;                                                \
            over1 += r > 0.001 ? 1.0 : 0.0; over5 += r > 0.005 ? 1.0 : 0.0;                       \
        }                                                                                         \
    }                                                                                             \
    *m = (Moments){sxy, sxx, syy, sx, sy, sdd, sad, mad, srel, mrel, xmin, xmax, ymin, ymax,      \
                   over1, over5};                                                                 \
}

DEFINE_MOMENTS(moments_f, float)
DEFINE_MOMENTS(moments_d, double)

/* ln(z) for a positive normal double, in arithmetic the SSE2 vectorizer takes (no libm call, no
 * 64-bit integer compare or int64-to-double conversion): z = m 2^k with m in [sqrt(1/2), sqrt(2)),
 * ln m = 2 atanh(t), t = (m - 1)/(m + 1), |t| < 0.1716, by nine terms of its series, and k ln 2
 * in two parts as in fdlibm. Relative error below 1.2e-15 against libm for z in [1e-15, 1e15]. */
static inline double vlog(double z)
{
    union { double d; uint64_t u; } b = {z}, m, e;  /* type punning the vectorizer follows */
    m.u = (b.u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;  /* the mantissa, in [1, 2) */
    e.u = (b.u >> 52) | 0x4330000000000000ULL;  /* 2^52 + the biased exponent, as a double */
    int above = m.d > 1.4142135623730951;
    double mm = above ? 0.5 * m.d : m.d, k = e.d - (4503599627370496.0 + 1023.0) + (above ? 1.0 : 0.0);
    double t = (mm - 1.0) / (mm + 1.0), t2 = t * t;
    double p = 1.0 + t2 * (1.0 / 3 + t2 * (1.0 / 5 + t2 * (1.0 / 7 + t2 * (1.0 / 9 + t2 * (1.0 / 11
               + t2 * (1.0 / 13 + t2 * (1.0 / 15 + t2 * (1.0 / 17))))))));
    return k * 6.93147180369123816490e-01 + (k * 1.90821492927058770002e-10 + 2.0 * t * p);
}

/* The KL walk (the algebra is in metrics._kl): per element, with q = c*ax and s = (q-ay)/(q+ay),
 * (q + ay) s^2 + 2q (atanh(s) - s), which is q ln(q/ay) - q + ay without its cancellation.
 * Where |s| < bound atanh(s) - s is its series. Elements beyond (sides that disagree by more than
 * ~20%: common, e.g. the zeros of a ReLU output against small noise) take the logarithm in a
 * second pass over their block, run only for blocks that have any. z = q/ay stays within
 * [eps32^2, eps32^-2] because both sides are floored at eps32 of their range. */
#define ATANH_REST2(s, s2) ((s) * (s2) * (2.0 / 3 + (s2) * (2.0 / 5 + (s2) * (2.0 / 7 + (s2) * (2.0 / 9)))))
#define KL_SCALED                                                                                 \
            double ax = x[i] - xlo, ay = y[i] - ylo;                                              \
            ax = ax > xfloor ? ax : xfloor;                                                       \
            ay = ay > yfloor ? ay : yfloor;                                                       \
            double q = c * ax;
#define DEFINE_KL(NAME, T)                                                                        \
CLONES static void NAME(const T *restrict x, const T *restrict y, Py_ssize_t n, const double p[6],       \
                 double out[3])                                                                   \
{                                                                                                 \
    const double xlo = p[0], xfloor = p[1], ylo = p[2], yfloor = p[3], c = p[4], bound = p[5];    \
    double sax = 0, say = 0, f = 0, far[BLOCK];                                                   \
    int idx[BLOCK];                                                                               \
    for (Py_ssize_t lo = 0; lo < n; lo += BLOCK) {                                                \
        Py_ssize_t hi = n - lo > BLOCK ? lo + BLOCK : n;                                          \
        double fars = 0;                                                                          \
        _Pragma("omp simd reduction(+:sax,say,f,fars)")                                           \
        for (Py_ssize_t i = lo; i < hi; i++) {                                                    \
            KL_SCALED                                                                             \
            double den = q + ay, s = (q - ay) / den, s2 = s * s;                                  \
            int near = fabs(s) < bound;                                                           \
            sax += ax; say += ay;                                                                 \
            f += near ? den * s2 + q * ATANH_REST2(s, s2) : 0.0;                                  \
            far[i - lo] = near ? 0.0 : 1.0;                                                       \
            fars += far[i - lo];                                                                  \
        }                                                                                         \
        if (fars > 0) {                                                                           \
            Py_ssize_t nf = 0;                                                                    \
            for (Py_ssize_t j = 0; j < hi - lo; j++) {  /* branch-free gather of their indices */ \
                idx[nf] = (int)j;                                                                 \
                nf += far[j] > 0;                                                                 \
            }                                                                                     \
            _Pragma("omp simd reduction(+:f)")                                                    \
            for (Py_ssize_t j = 0; j < nf; j++) {                                                 \
                Py_ssize_t i = lo + idx[j];                                                       \
                KL_SCALED                                                                         \
                f += q * vlog(q / ay) - q + ay;                                                   \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
    out[0] = sax; out[1] = say; out[2] = f;                                                       \
}

DEFINE_KL(kl_f, float)
DEFINE_KL(kl_d, double)

/* Both buffers C-contiguous, of one length and of one type, 'f' or 'd'; returns that type. */
static int get_pair(PyObject *ox, PyObject *oy, Py_buffer *bx, Py_buffer *by, char *type)
{
    if (PyObject_GetBuffer(ox, bx, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (PyObject_GetBuffer(oy, by, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(bx);
        return -1;
    }
    const char *fx = bx->format ? bx->format : "B", *fy = by->format ? by->format : "B";
    if (fx[0] == '<' || fx[0] == '=' || fx[0] == '@') fx++;
    if (fy[0] == '<' || fy[0] == '=' || fy[0] == '@') fy++;
    if (strcmp(fx, fy) != 0 || (strcmp(fx, "f") != 0 && strcmp(fx, "d") != 0)) {
        PyErr_Format(PyExc_TypeError, "both buffers must be float32 or both float64, not '%s' and '%s'",
                     bx->format, by->format);
    } else if (bx->len != by->len) {
        PyErr_SetString(PyExc_ValueError, "buffers of different lengths");
    } else {
        *type = fx[0];
        return 0;
    }
    PyBuffer_Release(bx);
    PyBuffer_Release(by);
    return -1;
}

static PyObject *moments(PyObject *self, PyObject *args)
{
    PyObject *ox, *oy;
    Py_buffer bx, by;
    char type;
    Moments m;
    if (!PyArg_ParseTuple(args, "OO:moments", &ox, &oy) || get_pair(ox, oy, &bx, &by, &type) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    if (type == 'f')
        moments_f(bx.buf, by.buf, bx.len / (Py_ssize_t)sizeof(float), &m);
    else
        moments_d(bx.buf, by.buf, bx.len / (Py_ssize_t)sizeof(double), &m);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bx);
    PyBuffer_Release(&by);
    return Py_BuildValue("(dddddddddddddddd)", m.sxy, m.sxx, m.syy, m.sx, m.sy, m.sdd, m.sad, m.mad,
                         m.srel, m.mrel, m.over1, m.over5, m.xmin, m.xmax, m.ymin, m.ymax);
}

static PyObject *kl(PyObject *self, PyObject *args)
{
    PyObject *ox, *oy;
    Py_buffer bx, by;
    char type;
    double p[6], out[3];
    if (!PyArg_ParseTuple(args, "OOdddddd:kl", &ox, &oy, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5])
        || get_pair(ox, oy, &bx, &by, &type) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    if (type == 'f')
        kl_f(bx.buf, by.buf, bx.len / (Py_ssize_t)sizeof(float), p, out);
    else
        kl_d(bx.buf, by.buf, bx.len / (Py_ssize_t)sizeof(double), p, out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bx);
    PyBuffer_Release(&by);
    return Py_BuildValue("(ddd)", out[0], out[1], out[2]);
}

static PyMethodDef methods[] = {
    {"moments", moments, METH_VARARGS, "The sums, extremes and counts of one chunk pair."},
    {"kl", kl, METH_VARARGS, "The three sums of the KL walk over one chunk pair."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel", "Fused metric loops.", -1, methods};

PyMODINIT_FUNC PyInit__kernel(void) { return PyModule_Create(&module); }
