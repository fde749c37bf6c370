/* SPDX-License-Identifier: ISC */
/*
 * Included first in every unit by scripts/analyze for gcc -fanalyzer
 * only, never in a build. glibc declares reallocarray() with the malloc
 * attribute (a fresh block for free()), and gcc 12's analyzer then takes
 * it for an allocator that leaves its argument alone: every grown array
 * reads as a leak of the old block, or a double free. Model it as the
 * realloc() it is.
 */
#include <stdlib.h>

#define reallocarray(p, n, size) realloc((p), (n) * (size))
