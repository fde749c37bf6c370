/* SPDX-License-Identifier: ISC */
/*
 * Unit tests of broker/confstate.c: a changed file is re-read by the next
 * confstate_get(), an unchanged one is not; the reload a look ran is
 * marked in use.
 */
#include <sys/resource.h>

#include <fcntl.h>
#include <unistd.h>

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

/*
 * A file that cannot be read at all (here: no descriptor left, as at
 * EMFILE) serves nothing, and is read again at the next use once it can
 * be, although it did not change; the failure counts once.
 */
Test(confstate, unreadable_file_is_tried_again)
{
	struct confstate cs;
	struct conf_errors e = { 0 };
	struct rlimit was, none;
	struct confref *r;
	int fd;

	cr_assert_eq(confstate_init(&cs, ct_path("egressd.ini"), NULL, NULL,
			 &e),
	    0, "%s", ct_errors(&e));
	write_conf("permissive"); /* changed: the next get re-reads it */
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	none = was;
	none.rlim_cur = (rlim_t)fd; /* every descriptor above fd is taken */
	(void)close(fd);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &none), 0);
	r = confstate_get(&cs);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
	cr_expect_null(r, "an unreadable file was served");
	confref_unref(r);
	cr_expect_eq(cs.failures, 1);
	cr_expect_eq(gen_now(&cs), 2, "not read again once it could be");
	cr_expect_eq(cs.failures, 1);
	confstate_done(&cs);
}

/* What the reload callback saw of in_use, and how often it ran. */
struct seen {
	struct confstate *cs;
	int calls;
	int in_use;
};

static void
record_cb(void *arg, const struct conf_snapshot *next)
{
	struct seen *s = arg;

	(void)next;
	s->calls++;
	s->in_use = s->cs->in_use;
}

/*
 * A reload that a look at the files ran (confstate_get()) calls back with
 * in_use set, so the broker leaves what may close open requests to its
 * loop; a reload asked for directly (SIGHUP, the control socket) calls
 * back with it clear; in_use is clear again after either.
 */
Test(confstate, reload_by_a_look_is_marked_in_use)
{
	struct confstate cs;
	struct conf_errors e = { 0 };
	struct seen s = { &cs, 0, -1 };

	cr_assert_eq(confstate_init(&cs, ct_path("egressd.ini"), record_cb, &s,
			 &e),
	    0, "%s", ct_errors(&e));
	write_conf("permissive");
	cr_expect_eq(gen_now(&cs), 2);
	cr_expect_eq(s.calls, 1);
	cr_expect_neq(s.in_use, 0, "a look's reload not marked in use");
	cr_expect_eq(cs.in_use, 0);
	write_conf("disabled");
	confstate_reload(&cs);
	cr_expect_eq(s.calls, 2);
	cr_expect_eq(s.in_use, 0, "a direct reload marked in use");
	cr_expect_eq(cs.in_use, 0);
	confstate_done(&cs);
}
