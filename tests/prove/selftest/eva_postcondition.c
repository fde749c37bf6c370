/* SPDX-License-Identifier: ISC */
/*
 * A harness scripts/prove must refuse: no alarm and no assertion or
 * precondition in EVA's summary, but one postcondition EVA cannot prove
 * and one it finds false. The summary counts neither, so only the
 * script's check of "[eva:alarm]" lines catches them (prove_selftest).
 * prove: sources
 */
#include "__fc_builtin.h"

/*@ ensures \result == x + 1; */
static int
next_below_100(int x)
{
	return x < 100 ? x + 1 : x;
}

/*@ ensures \result >= 0; */
static int
not_negative(int x)
{
	return x < 0 ? -1 : x;
}

int
main(void)
{
	int x = Frama_C_interval(-1000, 1000);

	return next_below_100(x) + not_negative(x);
}
