/* SPDX-License-Identifier: ISC */
/*
 * Unit tests of broker/confstate.c: a changed file is re-read by the next
 * confstate_get(), an unchanged one is not.
 */
#include <fcntl.h>

#include "broker/confstate.h"
#include "broker/log.h"
#include "conf_test.h"

static void
write_conf(const char *mode)
{
	char text[256];

	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\nsignature_mode = %s\n", mode);
	ct_write_str("egressd.ini", text);
}

static void
setup(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	log_set_fd(fd); /* egress.config events go nowhere */
	ct_mkdir();
	write_conf("disabled");
}

static void
teardown(void)
{
	ct_rmdir();
}

TestSuite(confstate, .init = setup, .fini = teardown);

static uint64_t
gen_now(struct confstate *cs)
{
	struct confref *r = confstate_get(cs);
	uint64_t g;

	cr_assert_not_null(r);
	g = r->snap->generation;
	confref_unref(r);
	return g;
}

Test(confstate, edit_is_seen_by_the_next_get)
{
	struct confstate cs;
	struct conf_errors e = { 0 };

	cr_assert_eq(confstate_init(&cs, ct_path("egressd.ini"), NULL, NULL,
			 &e),
	    0, "%s", ct_errors(&e));
	cr_expect_eq(gen_now(&cs), 1);
	cr_expect_eq(gen_now(&cs), 1); /* unchanged: no re-parse */
	write_conf("permissive");
	cr_expect_eq(gen_now(&cs), 2);
	cr_expect_eq(cs.reloads, 1);
	confstate_done(&cs);
}
