/* SPDX-License-Identifier: ISC */
/* spin: when the event loop polls instead of sleeping. */
#include <criterion/criterion.h>

#include "broker/spin.h"

/* A cold loop, as it starts, never polls adaptively. */
Test(spin, starts_cold)
{
	struct spin sp = { 0 };

	cr_expect_eq(spin_budget(&sp, 0, 50), 0);
}

/* Work that woke a wait within twice the bound turns it hot; the bound
 * is then the budget. */
Test(spin, close_work_turns_hot)
{
	struct spin sp = { 0 };

	spin_woke(&sp, 30, 1, 50);
	cr_expect_eq(spin_budget(&sp, 0, 50), 50);
	spin_woke(&sp, 100, 1, 50);
	cr_expect_eq(spin_budget(&sp, 0, 50), 50, "twice the bound counts");
}

/* Work further apart, a wait that found no work (a timer, idle), and a
 * wait that looks negative (a clock gone wrong) keep it cold. */
Test(spin, far_or_no_work_stays_cold)
{
	struct spin sp = { 0 };

	spin_woke(&sp, 101, 1, 50);
	cr_expect_eq(spin_budget(&sp, 0, 50), 0);
	spin_woke(&sp, 10, 0, 50);
	cr_expect_eq(spin_budget(&sp, 0, 50), 0);
	spin_woke(&sp, -1, 1, 50);
	cr_expect_eq(spin_budget(&sp, 0, 50), 0);
}

/* A hot loop cools at once: by a poll that ran out, or by a wait that
 * was too long. */
Test(spin, cools_down)
{
	struct spin sp = { 0 };

	spin_woke(&sp, 20, 1, 50);
	spin_missed(&sp);
	cr_expect_eq(spin_budget(&sp, 0, 50), 0);
	spin_woke(&sp, 20, 1, 50);
	spin_woke(&sp, 5000, 1, 50);
	cr_expect_eq(spin_budget(&sp, 0, 50), 0);
}

/* adaptive_poll_us = 0 turns it off, however close the work. */
Test(spin, zero_is_off)
{
	struct spin sp = { 0 };

	spin_woke(&sp, 0, 1, 0);
	cr_expect_eq(spin_budget(&sp, 0, 0), 0);
}

/* busy_poll_us, when set, polls after any wait that found work, close
 * or not, and wins over the adaptive bound. */
Test(spin, fixed_wins)
{
	struct spin sp = { 0 };

	spin_woke(&sp, 10, 1, 50);
	cr_expect_eq(spin_budget(&sp, 200, 50), 200);
	spin_woke(&sp, 5000, 1, 50);
	cr_expect_eq(spin_budget(&sp, 200, 50), 200, "far work too");
	spin_missed(&sp);
	cr_expect_eq(spin_budget(&sp, 200, 0), 200, "until the next wait");
}

/* Not at start, nor after a wait that found no work (a timer's). */
Test(spin, fixed_not_without_work)
{
	struct spin sp = { 0 };

	cr_expect_eq(spin_budget(&sp, 200, 0), 0, "at start");
	spin_woke(&sp, 10, 1, 0);
	spin_woke(&sp, 10, 0, 0);
	cr_expect_eq(spin_budget(&sp, 200, 0), 0, "after a timer");
}
