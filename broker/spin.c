/* SPDX-License-Identifier: ISC */
#include "broker/spin.h"

unsigned
spin_budget(const struct spin *sp, unsigned fixed_us, unsigned adaptive_us)
{
	if (fixed_us != 0)
		return sp->worked ? fixed_us : 0;
	return sp->hot ? adaptive_us : 0;
}

void
spin_woke(struct spin *sp, int64_t waited_us, int worked, unsigned adaptive_us)
{
	sp->worked = worked != 0;
	sp->hot = worked && adaptive_us != 0 && waited_us >= 0 &&
	    waited_us <= 2 * (int64_t)adaptive_us;
}

void
spin_missed(struct spin *sp)
{
	sp->hot = 0;
}
